import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { rawExchange } from "../../support/raw-http.ts";
import { AGENT_ID, gitlabJwt, OTHER_TOKEN, TOKEN } from "../support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../support/in-process.ts";

type ApiError = { error: string };
type AgentList = { agents: Array<{ agentId: string }> };

describe("API for GitLab (kas and agentk in-process)", () => {
  let kas: InProcessKas;
  let agents: InProcessAgentk[];
  let jwt: string;
  const api = (path: string, init: RequestInit = {}, token: string | null = jwt) =>
    fetch(`${kas.addresses.api}${path}`, {
      ...init,
      headers: { ...(token !== null && { "gitlab-kas-api-request": token }), ...(init.headers as object) },
    });

  beforeAll(async () => {
    kas = await startInProcessKas();
    jwt = await gitlabJwt(kas.apiSecret);
    const prometheus = createServer((req: IncomingMessage, res: ServerResponse) => {
      if (req.url?.startsWith("/stream")) {
        res.writeHead(200, { "content-type": "text/plain" });
        res.write("first\n");
        streams.push(res); // the test ends it
        return;
      }
      let body = "";
      req.on("data", (c) => {
        body += c;
      });
      req.on("end", () => {
        res.writeHead(200, { "content-type": "application/json", "x-agent": AGENT_ID });
        res.end(
          JSON.stringify({
            method: req.method,
            url: req.url,
            body,
            sawJwt: req.headers["gitlab-kas-api-request"] !== undefined,
            sawAuthorization: req.headers.authorization !== undefined,
          }),
        );
      });
    });
    // An echo protocol behind an HTTP Upgrade, as exec / port-forward would be.
    prometheus.on("upgrade", (_req, socket: Socket) => {
      socket.write("HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: echo\r\n\r\n");
      socket.pipe(socket);
    });
    agents = [
      await startInProcessAgentk({ kasUrl: kas.addresses.agent, token: TOKEN, services: { prometheus } }),
      await startInProcessAgentk({ kasUrl: kas.addresses.agent, token: OTHER_TOKEN, services: {} }),
    ];
    await Promise.all(agents.map((a) => a.agent.client.ready(5000)));
  });
  afterAll(async () => {
    await Promise.all(agents.map((a) => a.stop()));
    await kas.close();
  });
  const streams: ServerResponse[] = [];

  it("refuses requests without GitLab's JWT, or with a forged or misaddressed one: 401", async () => {
    const missing = await api("/api/v1/agents", {}, null);
    expect(missing.status).toBe(401);
    expect(((await missing.json()) as ApiError).error).toMatch(/missing gitlab-kas-api-request/i);
    const forged = await api("/api/v1/agents", {}, await gitlabJwt(new Uint8Array(32).fill(7)));
    expect(forged.status).toBe(401);
    expect(((await forged.json()) as ApiError).error).toMatch(/bad signature/);
    const wrongAud = await api("/api/v1/agents", {}, await gitlabJwt(kas.apiSecret, { aud: "gitlab" }));
    expect(wrongAud.status).toBe(401);
    const wrongIss = await api("/api/v1/agents", {}, await gitlabJwt(kas.apiSecret, { iss: "gitlab-kas" }));
    expect(wrongIss.status).toBe(401);
    const proxied = await api(`/api/v1/agents/${AGENT_ID}/services/prometheus/x`, {}, null);
    expect(proxied.status).toBe(401);
  });

  it("lists connected agents, all, by project or by agent", async () => {
    const all = (await (await api("/api/v1/agents")).json()) as AgentList;
    expect(all.agents.map((a: { agentId: string }) => a.agentId)).toEqual(["42", "43"]);
    expect(all.agents[0]).toMatchObject({ agentId: "42", projectId: "7", agentName: "prod", tunnels: 1 });
    const byProject = (await (await api("/api/v1/agents?project_id=8")).json()) as AgentList;
    expect(byProject.agents.map((a: { agentId: string }) => a.agentId)).toEqual(["43"]);
    expect((await api("/api/v1/agents?project_id=x")).status).toBe(400);
    const byAgent = (await (await api("/api/v1/agents?agent_id=42")).json()) as AgentList;
    expect(byAgent.agents.map((a: { agentId: string }) => a.agentId)).toEqual(["42"]);
    const none = (await (await api("/api/v1/agents?agent_id=99")).json()) as AgentList;
    expect(none.agents).toEqual([]);
    expect((await api("/api/v1/agents?agent_id=-1")).status).toBe(400);
  });

  it("proxies to an allow-listed service; GitLab's credentials stay at kas", async () => {
    const res = await api(`/api/v1/agents/${AGENT_ID}/services/prometheus/api/v1/query?query=up`, {
      method: "POST",
      body: "q=1",
      headers: { authorization: "Bearer x" },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-agent")).toBe(AGENT_ID);
    expect(await res.json()).toEqual({
      method: "POST",
      url: "/api/v1/query?query=up",
      body: "q=1",
      sawJwt: false,
      sawAuthorization: false,
    });
  });

  it("streams the response: the first chunk arrives before the service ends it", async () => {
    const res = await api(`/api/v1/agents/${AGENT_ID}/services/prometheus/stream`);
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(Buffer.from(first.value!).toString()).toBe("first\n");
    streams.at(-1)!.end("last\n");
    let rest = "";
    for (let r = await reader.read(); !r.done; r = await reader.read())
      rest += Buffer.from(r.value).toString();
    expect(rest).toBe("last\n");
  });

  it("a service that is not allow-listed: 404 with the agent's reason", async () => {
    const res = await api(`/api/v1/agents/${AGENT_ID}/services/grafana/`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as ApiError).error).toBe('service "grafana" is not allow-listed');
  });

  it("an agent that is not connected: 503 once agent.dial_timeout (1 s here) has passed", async () => {
    const res = await api("/api/v1/agents/999/services/prometheus/");
    expect(res.status).toBe(503);
    expect(((await res.json()) as ApiError).error).toMatch(/agent 999 is not connected/);
  });

  it("unknown endpoints: 404; bad agent ids: 400", async () => {
    expect((await api("/api/v1/nope")).status).toBe(404);
    expect((await api("/api/v1/agents/abc/services/prometheus/")).status).toBe(400);
  });

  // Issue 10, item 3: this Upgrade request made decodeURIComponent throw where nothing caught it; kas exited.
  it("a malformed percent-encoding in the path: 400 saying so, plain or Upgrade; kas carries on", async () => {
    const path = "/api/v1/agents/1/services/x%E0%A4%A/y";
    const answer = await rawExchange(
      Number(new URL(kas.addresses.api!).port),
      `GET ${path} HTTP/1.1\r\nhost: kas\r\ngitlab-kas-api-request: ${jwt}\r\nconnection: Upgrade\r\nupgrade: websocket\r\n\r\n`,
    );
    expect(answer.statusLine).toBe("HTTP/1.1 400 Bad Request");
    const expected = 'malformed percent-encoding in the service name "x%E0%A4%A"';
    expect(JSON.parse(answer.body)).toEqual({ error: expected });
    const plain = await api(path);
    expect(plain.status).toBe(400);
    expect(await plain.json()).toEqual({ error: expected });
    expect((await api("/api/v1/agents")).status).toBe(200);
  });

  it("an Upgrade request reaches the service and bytes flow both ways; without the JWT: 401", async () => {
    const upgrade = async (headers: string) => {
      const socket = connect(Number(new URL(kas.addresses.api!).port), "127.0.0.1");
      await once(socket, "connect");
      socket.write(
        `GET /api/v1/agents/${AGENT_ID}/services/prometheus/ws HTTP/1.1\r\nhost: kas\r\n${headers}connection: upgrade\r\nupgrade: echo\r\n\r\n`,
      );
      return socket;
    };
    const refused = await upgrade("");
    let reply = "";
    refused.on("data", (c) => {
      reply += c;
    });
    await once(refused, "close");
    expect(reply).toMatch(/^HTTP\/1.1 401 /);

    const socket = await upgrade(`gitlab-kas-api-request: ${jwt}\r\n`);
    let got = "";
    socket.on("data", (c) => {
      got += c;
    });
    while (!got.includes("\r\n\r\n")) await once(socket, "data");
    expect(got).toMatch(/^HTTP\/1.1 101 /);
    got = "";
    socket.write("ping");
    while (got !== "ping") await once(socket, "data");
    socket.end();
    await once(socket, "close");
  });
});
