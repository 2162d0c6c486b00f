// The examples and the demo are documentation that runs: each is run as a user would run it.
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, test } from "vitest";
import { type KubeApiServer, startKubeApiServer } from "../support/kube-apiserver.ts";

const run = promisify(execFile);

async function runExample(file: string, ...args: string[]): Promise<string> {
  return runWith({}, file, ...args);
}

async function runWith(env: Record<string, string>, file: string, ...args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, ["--import", "tsx", file, ...args], {
    cwd: new URL("../..", import.meta.url).pathname,
    env: { ...process.env, ...env },
    timeout: 60_000,
  });
  return stdout;
}

test("examples/http-behind-nat.ts: fetch() reaches a service that listens on no port", async () => {
  const out = await runExample("examples/http-behind-nat.ts");
  expect(out).toContain("HTTP 200 through the tunnel");
  expect(out).toContain('demo_requests_total{path="/metrics"} 1');
});

test("examples/library/quickstart.ts (the README's library example): runs as written, from the sources", async () => {
  // The package name resolves to lib/ through tsconfig.json's paths; test/package runs the same
  // file against the packed package.
  expect(await runExample("examples/library/quickstart.ts")).toBe(
    "agent-1 200 hello from the agent: /hello\n",
  );
});

test("examples/grpc-behind-nat.ts: a generated gRPC client calls through the tunnel", async () => {
  const out = await runExample("examples/grpc-behind-nat.ts");
  expect(out).toContain("gRPC reply through the tunnel: hello, world, from behind the NAT");
});

test("examples/tunnel-demo.ts: HTTP and gRPC through one tunnel, then a clean stop", async () => {
  const out = await runExample("examples/tunnel-demo.ts", "--once");
  expect(out).toMatch(/tunnel up from demo-agent/);
  expect(out).toMatch(/GET http:\/\/prometheus\/metrics through the tunnel -> 200: demo_http_requests_total/);
  expect(out).toMatch(/gRPC SayHello through the tunnel -> "hello kas, from inside the cluster"/);
  expect(out).toMatch(/stopping: GoAway, streams finish, tunnels close/);
});

describe("npm run demo: kas and agentk as processes", () => {
  let kube: KubeApiServer | undefined;
  let dir: string | undefined;
  afterAll(async () => {
    await kube?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test("without a kubeconfig: the in-cluster service through kas, and GitOps into a stand-in cluster", async () => {
    const out = await runWith({ KUBECONFIG: "/nonexistent/kubeconfig" }, "scripts/demo.ts", "--once");
    expect(out).toMatch(/agentk\s+connected: one outbound WebSocket to kas/);
    expect(out).toMatch(/GET \/api\/v1\/agents -> \[\{"agentId":"1","projectId":"1","agentName":"demo"/);
    expect(out).toMatch(/prometheus\/metrics -> 200: demo_scrapes_total\{path="\/metrics"\} 1/);
    expect(out).toMatch(/no kubeconfig at \/nonexistent\/kubeconfig: a STAND-IN for a cluster/);
    // What the stand-in cannot do is said up front.
    expect(out).toMatch(
      /the stand-in stores objects and answers kubectl, but runs nothing: no kubelet, no controllers/,
    );
    expect(out).toMatch(/`kubectl port-forward` reaches a greeting-and-echo port, not a process/);
    // kubectl as a newcomer: the kubeconfig `kas kubeconfig` printed, over TLS with kas's own CA.
    expect(out).toMatch(/kas kubeconfig --agent-id 1 > \S+kas-kubeconfig/);
    // agentk's pod is ready once agentk is connected, as its readiness probe would say.
    expect(out).toMatch(/kubectl\s+gitlab-agent\s+agentk-demo\s+1\/1\s+Running/);
    expect(out).toMatch(/agent configuration applied: commit \w+, log level debug/);
    expect(out).toMatch(/manifest project demo\/manifests synced: commit \w+, applied 2/);
    expect(out).toMatch(
      /configmaps\/greeting -> 200: data \{"greeting":"hello from commit 2"\}, field manager agentk/,
    );
    expect(out).toMatch(/agentk exited with code 0/);
    expect(out).toMatch(/kas exited with code 0/);
  }, 90_000);

  test("with a kubeconfig: namespaces listed through kas's Kubernetes API proxy", async () => {
    kube = await startKubeApiServer();
    dir = await mkdtemp(join(tmpdir(), "demo-kube-"));
    const kubeconfig = await kube.writeKubeconfig(join(dir, "config"));
    const out = await runWith({ KUBECONFIG: kubeconfig }, "scripts/demo.ts", "--once");
    expect(out).toMatch(
      /GET \/api\/v1\/namespaces of the cluster through kas's Kubernetes API proxy -> 200: .*default/,
    );
    expect(out).toMatch(/a real cluster, so GitOps is left out of this demo/);
    // The API server saw agentk's own credentials, never the demo token kas was given.
    const listed = kube.requests.filter((r) => r.path.startsWith("/api/v1/namespaces"));
    expect(listed.length).toBeGreaterThan(0);
    expect(listed.every((r) => r.headers.authorization === `Bearer ${kube!.token}`)).toBe(true);
  }, 90_000);
});
