// The examples and the demo are documentation that runs: each is run as a user would run it.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { expect, test } from "vitest";

const run = promisify(execFile);

async function runExample(file: string, ...args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, ["--import", "tsx", file, ...args], {
    cwd: new URL("../..", import.meta.url).pathname,
    timeout: 30_000,
  });
  return stdout;
}

test("examples/http-behind-nat.ts: fetch() reaches a service that listens on no port", async () => {
  const out = await runExample("examples/http-behind-nat.ts");
  expect(out).toContain("HTTP 200 through the tunnel");
  expect(out).toContain('demo_requests_total{path="/metrics"} 1');
});

test("examples/grpc-behind-nat.ts: a generated gRPC client calls through the tunnel", async () => {
  const out = await runExample("examples/grpc-behind-nat.ts");
  expect(out).toContain("gRPC reply through the tunnel: hello, world, from behind the NAT");
});

test("npm run demo -- --once: HTTP and gRPC through one tunnel, then a clean stop", async () => {
  const out = await runExample("examples/demo.ts", "--once");
  expect(out).toMatch(/tunnel up from demo-agent/);
  expect(out).toMatch(/GET http:\/\/prometheus\/metrics through the tunnel -> 200: demo_http_requests_total/);
  expect(out).toMatch(/gRPC SayHello through the tunnel -> "hello kas, from inside the cluster"/);
  expect(out).toMatch(/stopping: GoAway, streams finish, tunnels close/);
});
