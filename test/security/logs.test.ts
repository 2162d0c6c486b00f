// Logs an attacker can flood: a client that goes away mid-request is no fault of kas's (no warn or
// error line, anywhere on the way: kas, agentk), and however often one line repeats, only a bounded
// number of copies is written, then one line saying how many were left out. kas and agentk in this
// process with their real fronts; every line they write is captured.
import { randomBytes } from "node:crypto";
import { EventEmitter, once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type RequestListener, type ServerResponse } from "node:http";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../tool/observability/index.ts";
import { AGENT_ID, gitlabJwt, TOKEN } from "../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../support/agentk-in-process.ts";
import { GitLabApiServer } from "../support/gitlab-api.ts";
import { bearer, gitlabServiceClients, grpcTarget } from "../support/gitlab-grpc.ts";
import { until } from "../support/until.ts";

type Line = { level: number; msg: string; name?: string; [field: string]: unknown };
const WARN = 40;

/** Every line written to `lines`, parsed. */
function capture(lines: Line[], name: string) {
  return createLogger({
    level: "debug",
    name,
    destination: { write: (text: string) => void lines.push(JSON.parse(text) as Line) },
  });
}

/**
 * A slow in-cluster service: `/stall` never answers, `/partial` sends its head and one line and
 * then holds; an Upgrade to `/stall` is never answered, one to `/echo` is (101, then an echo).
 * It says when a request arrives and when its connection is cut (the cut went all the way).
 */
function slowService(
  events: EventEmitter,
): RequestListener & { upgrade: (req: IncomingMessage, s: Socket) => void } {
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? "/", "http://x").pathname;
    res.once("close", () => events.emit("cut", path));
    if (path.endsWith("/partial")) {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("first\n");
    }
    events.emit("request", path);
  };
  return Object.assign(handler, {
    upgrade(req: IncomingMessage, socket: Socket) {
      const path = new URL(req.url ?? "/", "http://x").pathname;
      socket.on("error", () => {});
      // An upgraded socket is half-open (node:http's allowHalfOpen): agentk's FIN ends it, no close.
      let cut = false;
      const onCut = () => {
        if (!cut) events.emit("cut", path);
        cut = true;
      };
      socket.once("end", onCut);
      socket.once("close", onCut);
      if (path.endsWith("/echo")) {
        socket.write("HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: echo\r\n\r\n");
        socket.pipe(socket);
      }
      events.emit("request", path);
    },
  });
}

/**
 * `service` on a loopback server. As the Kubernetes API, it answers what else agentk asks (its
 * informers' lists: empty; their watches: held open), as an API server would.
 */
function serverOf(service: ReturnType<typeof slowService>, kubernetes = false) {
  const server = createServer((req, res) => {
    if (!kubernetes || /\/(stall|partial)$/.test(new URL(req.url ?? "/", "http://x").pathname))
      return service(req, res);
    res.writeHead(200, { "content-type": "application/json" });
    if (req.url?.includes("watch=true")) res.flushHeaders();
    else
      res.end(
        JSON.stringify({ kind: "List", apiVersion: "v1", metadata: { resourceVersion: "1" }, items: [] }),
      );
  });
  server.on("upgrade", service.upgrade);
  return server;
}

describe("a client that goes away mid-request: no warn or error line", () => {
  const lines: Line[] = [];
  const service = new EventEmitter();
  let gitlab: GitLabApiServer;
  let dir: string;
  let kas: InProcessKas;
  let agent: InProcessAgentk;
  let jwt: string;

  beforeAll(async () => {
    // GitLab, for the Kubernetes API proxy's CI job tokens; the agent itself uses a static token.
    const secret = new Uint8Array(randomBytes(32));
    gitlab = await GitLabApiServer.start({ secret });
    dir = await mkdtemp(join(tmpdir(), "kas-logs-"));
    const secretFile = join(dir, "gitlab_secret");
    await writeFile(secretFile, Buffer.from(secret).toString("base64"));
    kas = await startInProcessKas(
      (c) => {
        c.gitlab.address = gitlab.url;
        c.gitlab.authenticationSecretFile = secretFile;
      },
      { log: capture(lines, "kas") },
    );
    jwt = await gitlabJwt(kas.apiSecret);
    agent = await startInProcessAgentk({
      kasUrl: kas.addresses.agent,
      token: TOKEN,
      services: { slow: serverOf(slowService(service)) },
      kubernetes: serverOf(slowService(service), true),
      log: capture(lines, "agentk"),
    });
    await agent.agent.client.ready(5000);
  });
  afterAll(async () => {
    await gitlab?.close(); // first: the request GitLab holds would keep kas's stop waiting
    await agent?.stop();
    await kas?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** The value of kas's first metric line starting with `prefix` and holding every one of `labels` (0 when none). */
  const metric = async (prefix: string, ...labels: string[]): Promise<number> => {
    const text = await (await fetch(`${kas.addresses.observability}/metrics`)).text();
    const line = text.split("\n").find((l) => l.startsWith(prefix) && labels.every((x) => l.includes(x)));
    return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : 0;
  };
  /** How many requests of `route` kas recorded as ended with `status`. */
  const ended = (route: string, status: string) =>
    metric("kas_request_duration_seconds_count{", `route="${route}"`, `status="${status}"`);

  /** A raw HTTP/1.1 connection to `address` that has sent `head`, with what it received so far. */
  const open = async (address: string, head: string) => {
    const url = new URL(address);
    const socket = connect(Number(url.port), url.hostname);
    await once(socket, "connect");
    const received = { text: "" };
    socket.on("data", (c: Buffer) => {
      received.text += c.toString("latin1");
    });
    socket.on("error", () => {});
    socket.write(head);
    return { socket, received };
  };

  /**
   * Sends `head`, waits until `ready` (the slow service saw the request, the client received some
   * text, GitLab was asked), then resets the connection (RST, as a client killed mid-request
   * does). Returns what was logged meanwhile, once the cut reached the service (when it had the
   * request) and kas recorded the request's end as `status` for `route`.
   */
  const leaveMidway = async (o: {
    address: string;
    head: string;
    ready: { service: string } | { received: string } | "gitlab";
    route: string;
    status: string;
  }): Promise<Line[]> => {
    const before = await ended(o.route, o.status);
    const signal = AbortSignal.timeout(5000);
    const seen = "service" in Object(o.ready) ? once(service, "request", { signal }) : undefined;
    const cut = seen ? once(service, "cut", { signal }) : undefined;
    const asked = gitlab.proxyAuthRequests;
    if (o.ready === "gitlab") gitlab.failNext("hang");
    const from = lines.length;
    const { socket, received } = await open(o.address, o.head);
    if (o.ready === "gitlab") await until(() => gitlab.proxyAuthRequests > asked, 5000, "kas asking GitLab");
    else if ("service" in o.ready) expect((await seen!)[0]).toBe(o.ready.service);
    else {
      const want = o.ready.received;
      await until(() => received.text.includes(want), 5000, `"${want}" from kas`);
    }
    socket.resetAndDestroy();
    if (cut) expect((await cut)[0]).toBe((o.ready as { service: string }).service);
    await until(async () => (await ended(o.route, o.status)) > before, 5000, `kas recording ${o.status}`);
    return lines.slice(from);
  };

  const loud = (got: Line[]) => got.filter((l) => l.level >= WARN).map((l) => `${l.name}: ${l.msg}`);
  const SERVICE_ROUTE = "/api/v1/agents/{agent_id}/services/{name}/*";
  const apiGet = (path: string, extra = "") =>
    `GET ${path} HTTP/1.1\r\nhost: kas\r\ngitlab-kas-api-request: ${jwt}\r\n${extra}\r\n`;
  const kubeGet = (path: string, token: string, extra = "") =>
    `GET ${path} HTTP/1.1\r\nhost: kas\r\nauthorization: Bearer ${token}\r\n${extra}\r\n`;
  const UPGRADE = "connection: upgrade\r\nupgrade: echo\r\n";
  const services = `/api/v1/agents/${AGENT_ID}/services/slow`;

  it("API port: before the agent's service answers, mid-response, mid-upgrade, an event stream, a gRPC watch", async () => {
    const api = kas.addresses.api!;
    const got: Line[] = [];
    const leave = async (o: Omit<Parameters<typeof leaveMidway>[0], "address">) =>
      got.push(...(await leaveMidway({ address: api, ...o })));
    await leave({
      head: apiGet(`${services}/stall`),
      ready: { service: "/stall" },
      route: SERVICE_ROUTE,
      status: "499",
    });
    await leave({
      head: apiGet(`${services}/partial`),
      ready: { received: "first" },
      route: SERVICE_ROUTE,
      status: "499",
    });
    // Upgrades are spliced once the stream to the agent is open: what ends then is the splice (101).
    await leave({
      head: apiGet(`${services}/stall`, UPGRADE),
      ready: { service: "/stall" },
      route: SERVICE_ROUTE,
      status: "101",
    });
    await leave({
      head: apiGet(`${services}/echo`, UPGRADE),
      ready: { received: "\r\n\r\n" },
      route: SERVICE_ROUTE,
      status: "101",
    });
    const events = "/api/v1/agents/{agent_id}/events";
    await leave({
      head: apiGet(`/api/v1/agents/${AGENT_ID}/events`),
      ready: { received: "\r\n\r\n" },
      route: events,
      status: "200",
    });

    // GitLab cancels a views watch (gRPC on the same port).
    const subscribers = () => metric("kas_cluster_views_subscribers ");
    const before = await subscribers();
    const { ClusterViewsWatch } = gitlabServiceClients();
    const client = new ClusterViewsWatch(grpcTarget(api), grpc.credentials.createInsecure());
    const from = lines.length;
    try {
      const call = (client as unknown as Record<string, Function>).WatchAgentViews!.call(
        client,
        { agent_id: AGENT_ID },
        bearer(jwt),
      ) as grpc.ClientReadableStream<unknown>;
      call.on("error", () => {});
      await until(async () => (await subscribers()) > before, 5000, "the watch subscribed");
      call.cancel();
      await until(async () => (await subscribers()) === before, 5000, "the watch let go");
    } finally {
      client.close();
    }
    got.push(...lines.slice(from));
    expect(loud(got)).toEqual([]);
  });

  it("Kubernetes API proxy: while kas asks GitLab, before the API server answers, mid-watch, mid-exec", async () => {
    const proxy = kas.addresses.kubernetesApi!;
    const got: Line[] = [];
    const leave = async (o: Omit<Parameters<typeof leaveMidway>[0], "address">) =>
      got.push(...(await leaveMidway({ address: proxy, ...o })));
    // A CI job's token: kas asks GitLab's allowed_agents, which holds its answer.
    await leave({
      head: kubeGet("/api/v1/namespaces", "ci:42:a-job-token"),
      ready: "gitlab",
      route: "kubernetes_api",
      status: "499",
    });
    // The same for an exec (another job: a lookup in flight is shared by the callers of one token).
    await leave({
      head: kubeGet("/api/v1/namespaces/default/pods/p/exec", "ci:42:another-job-token", UPGRADE),
      ready: "gitlab",
      route: "kubernetes_api_upgrade",
      status: "499",
    });
    const stall = "/api/v1/namespaces/stall";
    await leave({
      head: kubeGet(stall, TOKEN),
      ready: { service: stall },
      route: "kubernetes_api",
      status: "499",
    });
    await leave({
      head: kubeGet("/api/v1/pods/partial", TOKEN),
      ready: { received: "first" },
      route: "kubernetes_api",
      status: "499",
    });
    const exec = "/api/v1/namespaces/default/pods/p/exec/echo";
    await leave({
      head: kubeGet(exec, TOKEN, UPGRADE),
      ready: { received: "\r\n\r\n" },
      route: "kubernetes_api_upgrade",
      status: "101",
    });
    expect(loud(got)).toEqual([]);
  });
});

describe("repeated lines are rationed", () => {
  it("1000 identical warnings: a bounded number of lines, then one saying how many were left out", async () => {
    const lines: Line[] = [];
    const summary = new EventEmitter();
    const log = createLogger({
      level: "info",
      destination: {
        write: (text: string) => {
          const line = JSON.parse(text) as Line;
          lines.push(line);
          if (line.suppressed !== undefined) summary.emit("line", line);
        },
      },
      limits: { burst: 10, windowMs: 200 },
    });
    const summarized = once(summary, "line", { signal: AbortSignal.timeout(5000) });
    for (let i = 0; i < 1000; i++) log.warn({ attempt: i }, "client went away");
    log.warn({}, "another kind of line"); // a kind of its own: not held back by the first
    expect(lines.map((l) => l.msg)).toEqual([...Array(10).fill("client went away"), "another kind of line"]);
    const [line] = (await summarized) as [Line];
    expect(line).toMatchObject({ level: WARN, suppressed: 990, similar: "client went away" });
    expect(line.msg).toBe("suppressed 990 similar lines");
    // A new window: the kind is written again.
    log.warn({}, "client went away");
    expect(lines.at(-1)!.msg).toBe("client went away");
  });

  it("past the kinds it tracks (a message carrying varying text), new kinds share one ration", async () => {
    const lines: Line[] = [];
    const summary = new EventEmitter();
    const log = createLogger({
      level: "info",
      destination: {
        write: (text: string) => {
          const line = JSON.parse(text) as Line;
          lines.push(line);
          if (line.suppressed !== undefined) summary.emit("line", line);
        },
      },
      limits: { burst: 2, windowMs: 200, maxKinds: 3 },
    });
    const summarized = once(summary, "line", { signal: AbortSignal.timeout(5000) });
    for (let i = 0; i < 1000; i++) log.warn({}, `no such agent ${i}`);
    // Three kinds tracked, then one shared ration of 2 for all the others.
    expect(lines.map((l) => l.msg)).toEqual([
      "no such agent 0",
      "no such agent 1",
      "no such agent 2",
      "no such agent 3",
      "no such agent 4",
    ]);
    const [line] = (await summarized) as [Line];
    expect(line).toMatchObject({ level: WARN, suppressed: 995 });
  });

  it("by default too: a flood of one line is cut to a handful", () => {
    const lines: string[] = [];
    const log = createLogger({
      level: "info",
      destination: { write: (text: string) => void lines.push(text) },
    });
    for (let i = 0; i < 1000; i++) log.error({ i }, "request failed");
    expect(lines.length).toBeLessThanOrEqual(20);
  });
});
