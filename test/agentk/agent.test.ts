// agentk as a spawned process with kas in this process: the tunnel, the allow-listed services and
// the Kubernetes API proxy, end to end.
import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Watch } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { serveTunnels } from "../../lib/tunnel/index.ts";
import { gitlabJwt, TOKEN } from "../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../kas/support/in-process.ts";
import { type KubeApiServer, startKubeApiServer } from "../support/kube-apiserver.ts";
import { closedPort } from "../support/ports.ts";
import { until } from "../support/until.ts";
import { kubeClient, rawUpgrade } from "./support/kube-client.ts";
import { type JsonLinesProcess, msg, observabilityUrl, spawnAgentk } from "./support/processes.ts";

/** What the client sent kas (a dev token kas accepts); agentk must never pass it to the API server. */
const KAS_SIDE_TOKEN = TOKEN;

let dir: string;
let api: KubeApiServer;
let kas: InProcessKas;
let service: Server & { seen: { method: string; url: string; headers: Record<string, unknown> }[] };
let agent: JsonLinesProcess;
let observability: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "agentk-"));
  api = await startKubeApiServer();
  kas = await startInProcessKas();
  service = Object.assign(
    createServer((req, res) => {
      service.seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers });
      res.setHeader("content-type", "text/plain");
      res.end(`up{job="test"} 1\npath ${req.url}\n`);
    }),
    { seen: [] },
  );
  service.listen(0, "127.0.0.1");
  await once(service, "listening");
  const tokenFile = join(dir, "token");
  await writeFile(tokenFile, TOKEN);
  const kubeconfig = await api.writeKubeconfig(join(dir, "kubeconfig"));
  agent = spawnAgentk(
    [
      "--kas-address",
      kas.addresses.agent,
      "--token-file",
      tokenFile,
      "--kubeconfig",
      kubeconfig,
      "--service",
      `prometheus=http://127.0.0.1:${(service.address() as AddressInfo).port}/prefix`,
      "--service",
      `gone=http://127.0.0.1:${await closedPort()}`,
      "--keepalive-interval",
      "200ms",
    ],
    {
      AGENTK_OBSERVABILITY_LISTEN_ADDRESS: "127.0.0.1:0",
      POD_NAME: "agentk-7d9f",
      POD_NAMESPACE: "gitlab-agent",
    },
  );
  observability = await observabilityUrl(agent);
  await agent.waitFor(msg("connected to kas"));
});

afterAll(async () => {
  agent?.kill();
  await kas?.close();
  await api?.close();
  service?.closeAllConnections();
  service?.close();
  await rm(dir, { recursive: true, force: true });
});

/** The agent's tunnel as kas holds it. */
async function session() {
  await until(() => kas.kas.agents!.server.sessions.size > 0, 10_000, "agentk's tunnel at kas");
  return [...kas.kas.agents!.server.sessions][0]!;
}

/** GitLab's request to the agent's service `name` through kas's API. */
async function viaGitLab(name: string, path: string, headers: Record<string, string> = {}) {
  return fetch(`${kas.addresses.api}/api/v1/agents/42/services/${name}${path}`, {
    headers: { ...headers, "gitlab-kas-api-request": await gitlabJwt(kas.apiSecret) },
  });
}

/** A request to the cluster through kas's Kubernetes API proxy, with the dev token. */
function viaProxy(path: string, headers: Record<string, string> = {}) {
  return fetch(`${kas.addresses.kubernetesApi}${path}`, {
    headers: { authorization: `Bearer ${KAS_SIDE_TOKEN}`, ...headers },
  });
}

const proxyPort = () => Number(new URL(kas.addresses.kubernetesApi).port);

describe("agentk with kas", () => {
  test("dials kas with its token and names its pod; ready once connected", async () => {
    const tunnel = await session();
    expect(kas.kas.agents!.server.sessions.size).toBe(1);
    expect(tunnel.identity).toMatchObject({
      agentId: "42",
      pod: { name: "agentk-7d9f", namespace: "gitlab-agent" },
    });
    const ready = await fetch(`${observability}/readiness`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ checks: [{ name: "tunnel", ok: true }] });
  });

  test("pings kas whenever the tunnel has been quiet for --keepalive-interval", async () => {
    const tunnel = await session();
    const start = tunnel.stats.bytesIn;
    // A ping is one 12-byte yamux frame; the default interval (55 s) would send none in this time.
    await until(() => tunnel.stats.bytesIn >= start + 3 * 12, 5_000, "three pings from agentk");
  });

  test("proxies to an allow-listed in-cluster HTTP service, under its base path", async () => {
    const res = await viaGitLab("prometheus", "/api/v1/query?query=up", { accept: "text/plain" });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('up{job="test"} 1\npath /prefix/api/v1/query?query=up\n');
    expect(service.seen.at(-1)).toMatchObject({ method: "GET", url: "/prefix/api/v1/query?query=up" });
    expect(service.seen.at(-1)!.headers.host).toBe(`127.0.0.1:${(service.address() as AddressInfo).port}`);
  });

  test("an allow-listed service that is down: 502 saying so", async () => {
    const res = await viaGitLab("gone", "/metrics");
    expect(res.status).toBe(502);
    expect(await res.text()).toMatch(/^upstream 127\.0\.0\.1:\d+ failed: connect ECONNREFUSED/);
  });

  test("a service that is not allow-listed: agentk refuses its stream NOT_FOUND, GitLab gets 404 with the reason", async () => {
    const res = await viaGitLab("grafana", "/");
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: string }).error).toContain(
      'service "grafana" is not allow-listed',
    );
  });

  test("Kubernetes API: the real client lists namespaces through the tunnel with agentk's credentials", async () => {
    const { core } = kubeClient(kas.addresses.kubernetesApi, { token: KAS_SIDE_TOKEN });
    const before = api.requests.length;
    const list = await core.listNamespace();
    expect(list.items.map((n) => n.metadata?.name)).toEqual(
      expect.arrayContaining(["default", "kube-system"]),
    );
    const arrived = api.requests.slice(before).find((r) => r.path === "/api/v1/namespaces");
    expect(arrived?.headers.authorization).toBe(`Bearer ${api.token}`);
    // A request with a body, too.
    await core.createNamespace({ body: { metadata: { name: "made-through-tunnel" } } });
    expect(api.store.get("namespaces", undefined, "made-through-tunnel").metadata.uid).toBeTruthy();
    expect(JSON.stringify(api.requests)).not.toContain(KAS_SIDE_TOKEN);
  });

  test("Kubernetes API: a watch delivers each event as it happens", async () => {
    const { kc, core } = kubeClient(kas.addresses.kubernetesApi, { token: KAS_SIDE_TOKEN });
    const list = await core.listNamespace();
    const events: string[] = [];
    let notify = () => {};
    const next = async (count: number) => {
      const deadline = AbortSignal.timeout(10_000);
      while (events.length < count) {
        await new Promise<void>((resolve, reject) => {
          notify = resolve;
          deadline.addEventListener("abort", () => reject(new Error(`events so far: ${events}`)), {
            once: true,
          });
        });
      }
    };
    const watch = await new Watch(kc).watch(
      "/api/v1/namespaces",
      { resourceVersion: list.metadata?.resourceVersion },
      (type, obj: { metadata: { name: string } }) => {
        events.push(`${type} ${obj.metadata.name}`);
        notify();
      },
      () => {},
    );
    try {
      api.store.create("namespaces", undefined, { metadata: { name: "team-a" } });
      await next(1); // arrives while the watch is still open: streamed, not buffered
      expect(events).toEqual(["ADDED team-a"]);
      api.store.delete("namespaces", undefined, "team-a");
      await next(2);
      expect(events).toEqual(["ADDED team-a", "DELETED team-a"]);
    } finally {
      watch.abort();
    }
  });

  test("Kubernetes API: the caller's Authorization and Impersonate-* never reach the cluster; agentk's credentials do", async () => {
    const before = api.requests.length;
    const res = await viaProxy("/api/v1/namespaces/default", { "impersonate-user": "system:admin" });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ kind: "Namespace", metadata: { name: "default" } });
    const arrived = api.requests.slice(before).find((r) => r.path === "/api/v1/namespaces/default");
    expect(arrived?.headers.authorization).toBe(`Bearer ${api.token}`);
    expect(arrived?.headers["impersonate-user"]).toBeUndefined();
  });

  test("Kubernetes API: errors come back as the API server's Status", async () => {
    const res = await viaProxy("/api/v1/namespaces/missing");
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ kind: "Status", reason: "NotFound", code: 404 });
  });

  test("Kubernetes API: HTTP Upgrade (exec) answers 101, then bytes flow both ways", async () => {
    api.store.create("pods", "default", { metadata: { name: "shell" } });
    const { socket, received, head } = await rawUpgrade(
      { port: proxyPort() },
      "/api/v1/namespaces/default/pods/shell/exec?command=sh&stdin=true",
      { upgrade: "SPDY/3.1", authorization: `Bearer ${KAS_SIDE_TOKEN}` },
    );
    try {
      expect(head).toMatch(/^HTTP\/1.1 101 /);
      expect(head.toLowerCase()).toContain("upgrade: spdy/3.1");
      await received.until("exec default/shell\n");
      socket.write("echo through the tunnel\n");
      await received.until("echo through the tunnel\n");
      const arrived = api.requests.findLast((r) => r.path.includes("/pods/shell/exec"));
      expect(arrived?.headers.authorization).toBe(`Bearer ${api.token}`);
    } finally {
      socket.destroy();
    }
  });

  test("Kubernetes API: a refused Upgrade is relayed as the API server's answer", async () => {
    const { received, head, socket } = await rawUpgrade(
      { port: proxyPort() },
      "/api/v1/namespaces/default/pods/nobody/exec?command=sh",
      { upgrade: "SPDY/3.1", authorization: `Bearer ${KAS_SIDE_TOKEN}` },
    );
    try {
      expect(head).toMatch(/^HTTP\/1.1 404 /);
      await received.until('"reason":"NotFound"');
    } finally {
      socket.destroy();
    }
  });

  test("Kubernetes API: logs -f streams lines as they are written", async () => {
    api.store.create("pods", "default", { metadata: { name: "web" } });
    api.appendLog("default", "web", "booting");
    const res = await viaProxy("/api/v1/namespaces/default/pods/web/log?follow=true");
    expect(res.status).toBe(200);
    const lines = res.body!.getReader();
    expect(Buffer.from((await lines.read()).value!).toString()).toBe("booting\n");
    api.appendLog("default", "web", "listening on :8080");
    expect(Buffer.from((await lines.read()).value!).toString()).toBe("listening on :8080\n");
    await lines.cancel();
  });

  test("metrics: the tunnel and the requests it served", async () => {
    const metrics = await (await fetch(`${observability}/metrics`)).text();
    expect(metrics).toMatch(/^agentk_tunnels 1$/m);
    expect(metrics).toMatch(/agentk_request_duration_seconds_count\{route="kubernetes",status="200"\} [1-9]/);
    expect(metrics).toMatch(
      /agentk_request_duration_seconds_count\{route="service\/prometheus",status="200"\} 1/,
    );
  });

  test("SIGTERM: GoAway to kas, the tunnel closes, exit 0; the token never appears in the output", async () => {
    const tunnel = await session();
    const goaway = once(tunnel, "goaway", { signal: AbortSignal.timeout(20_000) });
    agent.kill("SIGTERM");
    expect(await agent.exitCode()).toBe(0);
    await goaway;
    expect(agent.output).not.toContain(TOKEN);
  });
});

test("--kas-header: extra handshake headers reach the tunnel server", async () => {
  const seen: Array<Record<string, unknown>> = [];
  // The library's own tunnel server, recording each handshake: what kas's authenticate hook sees.
  const server = await serveTunnels({
    host: "127.0.0.1",
    authenticate: (req) => {
      seen.push({ ...req.headers });
      return undefined;
    },
    onSession: () => {},
  });
  const tokenFile = join(dir, "header-token");
  await writeFile(tokenFile, TOKEN);
  const proc = spawnAgentk(
    ["--kas-address", server.url, "--token-file", tokenFile, "--kas-header", "X-Request-Source: agentk-test"],
    { AGENTK_OBSERVABILITY_LISTEN_ADDRESS: "127.0.0.1:0" },
  );
  try {
    await proc.waitFor(msg("connected to kas"));
    expect(seen[0]).toMatchObject({ "x-request-source": "agentk-test", authorization: `Bearer ${TOKEN}` });
  } finally {
    proc.kill();
    await server.close(0);
  }
});
