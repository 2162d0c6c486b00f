// agentk as a spawned process against a stand-in kas made from the tunnel library: the tunnel,
// the allow-listed services and the Kubernetes API proxy, end to end.
import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Watch } from "@kubernetes/client-node";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { RejectCode, StreamRejectedError } from "../../lib/tunnel/index.ts";
import { type KubeApiServer, startKubeApiServer } from "../support/kube-apiserver.ts";
import { closedPort } from "../support/ports.ts";
import { until } from "../support/until.ts";
import { kubeClient, rawUpgrade } from "./support/kube-client.ts";
import { type JsonLinesProcess, msg, observabilityUrl, spawnAgentk } from "./support/processes.ts";
import { type StandInKas, startStandInKas } from "./support/stand-in-kas.ts";

const TOKEN = "glagent-Zq8Xw3Rt6Yu1Io4Pa7Sd0Fg2";
/** What kas's own client sent; agentk must never pass it to the API server. */
const KAS_SIDE_TOKEN = "kas-side-credential";

let dir: string;
let api: KubeApiServer;
let kas: StandInKas;
let service: Server & { seen: { method: string; url: string; headers: Record<string, unknown> }[] };
let agent: JsonLinesProcess;
let observability: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "agentk-"));
  api = await startKubeApiServer();
  kas = await startStandInKas({ token: TOKEN });
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
      kas.url,
      "--token-file",
      tokenFile,
      "--kubeconfig",
      kubeconfig,
      "--service",
      `prometheus=http://127.0.0.1:${(service.address() as AddressInfo).port}/prefix`,
      "--service",
      `gone=http://127.0.0.1:${await closedPort()}`,
      "--kas-header",
      "X-Request-Source: agentk-test",
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

describe("agentk with a stand-in kas", () => {
  test("dials kas with its token and names its pod; ready once connected", async () => {
    await kas.session();
    const accepted = kas.handshakes.filter((h) => h.authorized);
    expect(accepted).toHaveLength(1);
    expect(accepted[0]!.headers["x-agentk-pod-name"]).toBe("agentk-7d9f");
    expect(accepted[0]!.headers["x-agentk-pod-namespace"]).toBe("gitlab-agent");
    expect(accepted[0]!.headers["x-request-source"]).toBe("agentk-test");
    const ready = await fetch(`${observability}/readiness`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ checks: [{ name: "tunnel", ok: true }] });
  });

  test("pings kas whenever the tunnel has been quiet for --keepalive-interval", async () => {
    const session = await kas.session();
    const start = session.stats.bytesIn;
    // A ping is one 12-byte yamux frame; the default interval (55 s) would send none in this time.
    await until(() => session.stats.bytesIn >= start + 3 * 12, 5_000, "three pings from agentk");
  });

  test("proxies to an allow-listed in-cluster HTTP service, under its base path", async () => {
    const res = await request("http://prometheus.test/api/v1/query?query=up", {
      dispatcher: kas.http("prometheus"),
      headers: { accept: "text/plain" },
    });
    expect(res.statusCode).toBe(200);
    expect(await res.body.text()).toBe('up{job="test"} 1\npath /prefix/api/v1/query?query=up\n');
    expect(service.seen.at(-1)).toMatchObject({ method: "GET", url: "/prefix/api/v1/query?query=up" });
    expect(service.seen.at(-1)!.headers.host).toBe(`127.0.0.1:${(service.address() as AddressInfo).port}`);
  });

  test("an allow-listed service that is down: 502 saying so", async () => {
    const res = await request("http://gone.test/metrics", { dispatcher: kas.http("gone") });
    expect(res.statusCode).toBe(502);
    expect(await res.body.text()).toMatch(/^upstream 127\.0\.0\.1:\d+ failed: connect ECONNREFUSED/);
  });

  test("a service that is not allow-listed: the stream is refused NOT_FOUND", async () => {
    const refused = await kas.open("grafana").catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StreamRejectedError);
    expect((refused as StreamRejectedError).code).toBe(RejectCode.REJECT_CODE_NOT_FOUND);
    expect((refused as StreamRejectedError).reason).toBe('service "grafana" is not allow-listed');
  });

  test("Kubernetes API: the real client lists namespaces through the tunnel with agentk's credentials", async () => {
    const forward = await kas.forward("kubernetes");
    const { core } = kubeClient(forward.url, { token: KAS_SIDE_TOKEN });
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
    const forward = await kas.forward("kubernetes");
    const { kc, core } = kubeClient(forward.url, { token: KAS_SIDE_TOKEN });
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

  test("Kubernetes API: kas's Authorization is replaced, Impersonate-* headers pass through", async () => {
    const before = api.requests.length;
    const res = await request("http://kubernetes.test/api/v1/namespaces/default", {
      dispatcher: kas.http("kubernetes"),
      headers: {
        authorization: `Bearer ${KAS_SIDE_TOKEN}`,
        "impersonate-user": "jane@example.com",
        "impersonate-group": "gitlab:developers",
      },
    });
    expect(res.statusCode).toBe(200);
    expect(await res.body.json()).toMatchObject({ kind: "Namespace", metadata: { name: "default" } });
    const arrived = api.requests.slice(before).find((r) => r.path === "/api/v1/namespaces/default");
    expect(arrived?.headers).toMatchObject({
      authorization: `Bearer ${api.token}`,
      "impersonate-user": "jane@example.com",
      "impersonate-group": "gitlab:developers",
    });
  });

  test("Kubernetes API: errors come back as the API server's Status", async () => {
    const res = await request("http://kubernetes.test/api/v1/namespaces/missing", {
      dispatcher: kas.http("kubernetes"),
    });
    expect(res.statusCode).toBe(404);
    expect(await res.body.json()).toMatchObject({ kind: "Status", reason: "NotFound", code: 404 });
  });

  test("Kubernetes API: HTTP Upgrade (exec) answers 101, then bytes flow both ways", async () => {
    api.store.create("pods", "default", { metadata: { name: "shell" } });
    const forward = await kas.forward("kubernetes");
    const { socket, received, head } = await rawUpgrade(
      { port: forward.port },
      "/api/v1/namespaces/default/pods/shell/exec?command=sh&stdin=true",
      { upgrade: "SPDY/3.1", authorization: `Bearer ${KAS_SIDE_TOKEN}`, "impersonate-user": "jane" },
    );
    try {
      expect(head).toMatch(/^HTTP\/1.1 101 /);
      expect(head.toLowerCase()).toContain("upgrade: spdy/3.1");
      await received.until("exec default/shell\n");
      socket.write("echo through the tunnel\n");
      await received.until("echo through the tunnel\n");
      const arrived = api.requests.findLast((r) => r.path.includes("/pods/shell/exec"));
      expect(arrived?.headers.authorization).toBe(`Bearer ${api.token}`);
      expect(arrived?.headers["impersonate-user"]).toBe("jane");
    } finally {
      socket.destroy();
    }
  });

  test("Kubernetes API: a refused Upgrade is relayed as the API server's answer", async () => {
    const forward = await kas.forward("kubernetes");
    const { received, head, socket } = await rawUpgrade(
      { port: forward.port },
      "/api/v1/namespaces/default/pods/nobody/exec?command=sh",
      { upgrade: "SPDY/3.1" },
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
    const res = await request("http://kubernetes.test/api/v1/namespaces/default/pods/web/log?follow=true", {
      dispatcher: kas.http("kubernetes"),
    });
    expect(res.statusCode).toBe(200);
    const lines = res.body[Symbol.asyncIterator]();
    expect(String((await lines.next()).value)).toBe("booting\n");
    api.appendLog("default", "web", "listening on :8080");
    expect(String((await lines.next()).value)).toBe("listening on :8080\n");
    await res.body.destroy();
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
    const session = await kas.session();
    const goaway = once(session, "goaway", { signal: AbortSignal.timeout(20_000) });
    agent.kill("SIGTERM");
    expect(await agent.exitCode()).toBe(0);
    await goaway;
    expect(agent.output).not.toContain(TOKEN);
  });
});
