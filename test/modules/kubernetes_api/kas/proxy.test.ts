import { once } from "node:events";
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Router } from "../../../../lib/router/index.ts";
import { serveKubernetesProxy } from "../../../../modules/kubernetes_api/kas/proxy-server.ts";
import { AgentHttpProxy } from "../../../../tool/http/proxy/index.ts";
import { kubeStatus } from "../../../../tool/kubernetes-status.ts";
import { OTHER_TOKEN, THIRD_TOKEN, TOKEN } from "../../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../../support/agentk-in-process.ts";
import { rawExchange } from "../../../support/raw-http.ts";

describe("Kubernetes API proxy (kas and agentk in-process)", () => {
  let kas: InProcessKas;
  let agents: InProcessAgentk[];
  let seen: IncomingHttpHeaders | undefined;
  let seenUrl: string | undefined;
  const watches: ServerResponse[] = [];
  // What agentk's Kubernetes module reaches: a tiny API server.
  const apiServer = createServer((req, res) => {
    // agentk's own leader election reaches this server too, at any moment: not a proxied request.
    if (!req.url?.startsWith("/apis/coordination.k8s.io/")) {
      seen = req.headers;
      seenUrl = req.url;
    }
    if (req.url?.includes("watch=true")) {
      res.writeHead(200, { "content-type": "application/json" });
      res.write(`${JSON.stringify({ type: "ADDED", object: { metadata: { name: "a" } } })}\n`);
      watches.push(res);
      return;
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ kind: "NamespaceList", items: [{ metadata: { name: "default" } }] }));
  });
  apiServer.on("upgrade", (req, socket: Socket) => {
    seen = req.headers;
    socket.write("HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: SPDY/3.1\r\n\r\n");
    socket.pipe(socket);
  });

  const proxy = (path: string, headers: Record<string, string> = {}) =>
    fetch(`${kas.addresses.kubernetesApi}${path}`, { headers });
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const status = async (res: Response) => {
    expect(res.headers.get("content-type")).toBe("application/json");
    return res.json();
  };

  beforeAll(async () => {
    kas = await startInProcessKas((c) => {
      c.agent.kubernetesApi.urlPathPrefix = "/k8s-proxy";
    });
    agents = await Promise.all([
      startInProcessAgentk({ kasUrl: kas.addresses.agent, token: TOKEN, kubernetes: apiServer }),
      // An agent without a Kubernetes configuration: it refuses `kubernetes` streams.
      startInProcessAgentk({ kasUrl: kas.addresses.agent, token: THIRD_TOKEN }),
    ]);
    await Promise.all(agents.map((a) => a.agent.client.ready(5000)));
  });
  afterAll(async () => {
    await Promise.all(agents.map((a) => a.stop()));
    await kas.close();
  });

  it("no token or an unknown one: 401 as a Kubernetes Status", async () => {
    const missing = await proxy("/k8s-proxy/api/v1/namespaces");
    expect(missing.status).toBe(401);
    expect(await status(missing)).toEqual({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message:
        'expected "Authorization: Bearer ci:<agent id>:<job token>", "Bearer pat:<agent id>:<token>" or the _gitlab_kas session cookie',
      reason: "Unauthorized",
      code: 401,
    });
    // kas refused, not the cluster.
    expect(missing.headers.get("gitlab-unauthorized")).toBe("true");
    const wrong = await proxy("/k8s-proxy/api/v1/namespaces", bearer("nope"));
    expect(wrong.status).toBe(401);
    expect(await status(wrong)).toMatchObject({ reason: "Unauthorized", code: 401 });
  });

  it("forwards to the agent's cluster under the prefix; the caller's credentials and impersonation stay at kas", async () => {
    const res = await proxy("/k8s-proxy/api/v1/namespaces?limit=5", {
      ...bearer(TOKEN),
      "impersonate-user": "admin",
      "impersonate-group": "system:masters",
      accept: "application/json",
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ items: [{ metadata: { name: "default" } }] });
    expect(seenUrl).toBe("/api/v1/namespaces?limit=5");
    expect(seen?.authorization).toBeUndefined();
    expect(seen?.["impersonate-user"]).toBeUndefined();
    expect(seen?.["impersonate-group"]).toBeUndefined();
    expect(seen?.accept).toBe("application/json");
  });

  it("outside the prefix: 404 Status", async () => {
    const res = await proxy("/api/v1/namespaces", bearer(TOKEN));
    expect(res.status).toBe(404);
    expect(await status(res)).toMatchObject({ kind: "Status", reason: "NotFound", code: 404 });
  });

  it("a watch streams: each event arrives while the watch is open", async () => {
    const res = await proxy("/k8s-proxy/api/v1/pods?watch=true", bearer(TOKEN));
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const first = JSON.parse(Buffer.from((await reader.read()).value!).toString());
    expect(first.type).toBe("ADDED");
    const watch = watches.shift()!;
    watch.write(`${JSON.stringify({ type: "DELETED", object: { metadata: { name: "a" } } })}\n`);
    const second = JSON.parse(Buffer.from((await reader.read()).value!).toString());
    expect(second.type).toBe("DELETED");
    watch.end();
    expect((await reader.read()).done).toBe(true);
  });

  it("exec-style Upgrade: 101 from the API server, then bytes both ways", async () => {
    const socket = connect(Number(new URL(kas.addresses.kubernetesApi).port), "127.0.0.1");
    await once(socket, "connect");
    socket.write(
      `POST /k8s-proxy/api/v1/namespaces/default/pods/p/exec?command=sh HTTP/1.1\r\nhost: kas\r\nauthorization: Bearer ${TOKEN}\r\nconnection: Upgrade\r\nupgrade: SPDY/3.1\r\n\r\n`,
    );
    let got = "";
    socket.on("data", (c) => {
      got += c;
    });
    while (!got.includes("\r\n\r\n")) await once(socket, "data");
    expect(got).toMatch(/^HTTP\/1.1 101 /);
    expect(seen?.authorization).toBeUndefined();
    got = "";
    socket.write("stdin bytes");
    while (got !== "stdin bytes") await once(socket, "data");
    socket.end();
    await once(socket, "close");
  });

  it("an Upgrade without a valid token: 401 Status on the raw connection", async () => {
    const socket = connect(Number(new URL(kas.addresses.kubernetesApi).port), "127.0.0.1");
    await once(socket, "connect");
    socket.write(
      "GET /k8s-proxy/api/v1/x HTTP/1.1\r\nhost: kas\r\nconnection: Upgrade\r\nupgrade: SPDY/3.1\r\n\r\n",
    );
    let got = "";
    socket.on("data", (c) => {
      got += c;
    });
    await once(socket, "close");
    expect(got).toMatch(/^HTTP\/1.1 401 Unauthorized\r\n/);
    expect(JSON.parse(got.slice(got.indexOf("\r\n\r\n") + 4))).toMatchObject({ kind: "Status", code: 401 });
  });

  it("the agent refuses (it has no Kubernetes configuration): 503 Status with its reason", async () => {
    const res = await proxy("/k8s-proxy/api/v1/namespaces", bearer(THIRD_TOKEN));
    expect(res.status).toBe(503);
    expect(await status(res)).toMatchObject({
      reason: "ServiceUnavailable",
      code: 503,
      message: expect.stringContaining("no Kubernetes configuration"),
    });
  });

  it("the agent is not connected: 503 Status after agent.dial_timeout", async () => {
    const res = await proxy("/k8s-proxy/api/v1/namespaces", bearer(OTHER_TOKEN));
    expect(res.status).toBe(503);
    expect(await status(res)).toMatchObject({ reason: "ServiceUnavailable", code: 503 });
  });
});

describe("Kubernetes API proxy: a failure of its own is a 500 Kubernetes Status, plain or Upgrade", () => {
  it("an authorization hook that throws (a bug, not a refusal)", async () => {
    const router = await new Router({}).start();
    const agentProxy = new AgentHttpProxy(router, { dialTimeoutMs: 100 });
    const front = await serveKubernetesProxy({
      listen: { address: { host: "127.0.0.1", port: 0 } },
      authorize: async () => {
        throw new TypeError("Cannot read properties of undefined");
      },
      proxy: agentProxy,
    });
    try {
      const res = await fetch(`${front.url}/api/v1/namespaces`);
      expect(res.status).toBe(500);
      expect(await res.json()).toEqual(kubeStatus(500, "internal error", "InternalError"));
      const answer = await rawExchange(
        front.port,
        "POST /api/v1/namespaces/default/pods/p/exec HTTP/1.1\r\nhost: kas\r\nconnection: Upgrade\r\nupgrade: SPDY/3.1\r\n\r\n",
      );
      expect(answer.statusLine).toBe("HTTP/1.1 500 Internal Server Error");
      expect(JSON.parse(answer.body)).toEqual(kubeStatus(500, "internal error", "InternalError"));
    } finally {
      await front.close(0);
      await agentProxy.destroy();
      await router.close();
    }
  });
});
