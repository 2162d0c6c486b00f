// agentk's tunnel under adverse conditions: a proxy in the way, a wrong token, kas killed or
// restarted, no Kubernetes configuration.
import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { RejectCode, StreamRejectedError } from "../../lib/tunnel/index.ts";
import { startConnectProxy } from "../support/connect-proxy.ts";
import { testPki } from "../support/tls-certs.ts";
import { msg, observabilityUrl, spawnAgentk, spawnStandInKas } from "./support/processes.ts";
import { startStandInKas } from "./support/stand-in-kas.ts";

const TOKEN = "glagent-Hx2Kd9Lm4Np7Qr0St3Vw6Yz1";

let dir: string;
let tokenFile: string;
let service: Server;
let serviceUrl: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "agentk-conn-"));
  tokenFile = join(dir, "token");
  await writeFile(tokenFile, TOKEN);
  service = createServer((req, res) => res.end(`hello from ${req.url}\n`));
  service.listen(0, "127.0.0.1");
  await once(service, "listening");
  serviceUrl = `http://127.0.0.1:${(service.address() as AddressInfo).port}`;
});
afterAll(async () => {
  service.closeAllConnections();
  service.close();
  await rm(dir, { recursive: true, force: true });
});

/** agentk with an observability port of its own, no Kubernetes configuration, one service "hello". */
async function agentk(kasAddress: string, extraArgs: string[] = [], env: NodeJS.ProcessEnv = {}) {
  const proc = spawnAgentk(
    [
      "--kas-address",
      kasAddress,
      "--token-file",
      tokenFile,
      "--service",
      `hello=${serviceUrl}`,
      ...extraArgs,
    ],
    { AGENTK_OBSERVABILITY_LISTEN_ADDRESS: "127.0.0.1:0", ...env },
  );
  return Object.assign(proc, { observability: await observabilityUrl(proc) });
}

async function hello(kas: { http(service: string): import("undici").Dispatcher }): Promise<string> {
  const res = await request("http://hello.test/ping", { dispatcher: kas.http("hello") });
  return res.body.text();
}

describe("agentk's tunnel", () => {
  test("through an HTTP CONNECT proxy (HTTPS_PROXY) to a TLS kas; no kube config -> kubernetes streams UNAVAILABLE", async () => {
    const pki = await testPki();
    const kas = await startStandInKas({ token: TOKEN, tls: { cert: pki.cert, key: pki.key } });
    const proxy = await startConnectProxy();
    const caFile = join(dir, "kas-ca.pem");
    await writeFile(caFile, pki.caCert);
    const agent = await agentk(kas.url, ["--ca-cert-file", caFile], { HTTPS_PROXY: proxy.url });
    try {
      expect(kas.url).toMatch(/^wss:\/\/127\.0\.0\.1:/);
      await agent.waitFor(msg("connected to kas"));
      expect(proxy.connects).toEqual([`127.0.0.1:${kas.port}`]);
      expect(await hello(kas)).toBe("hello from /ping\n");
      const refused = await kas.open("kubernetes").catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(StreamRejectedError);
      expect((refused as StreamRejectedError).code).toBe(RejectCode.REJECT_CODE_UNAVAILABLE);
      expect((refused as StreamRejectedError).reason).toBe("no Kubernetes configuration");
    } finally {
      agent.kill();
      await kas.close();
      await proxy.close();
    }
  });

  test("wrong token: kas answers 401 and the agent backs off, longer each time", async () => {
    const kas = await startStandInKas({ token: "a-different-token" });
    const agent = await agentk(kas.url);
    try {
      const retries = await agent.waitFor(msg("cannot reach kas; retrying"), 3);
      // Each retry is logged right after its handshake failed; the next one waits out the delay.
      expect(kas.handshakes).toHaveLength(3);
      expect(kas.handshakes.every((h) => !h.authorized)).toBe(true);
      expect(retries.map((r) => r.status)).toEqual([401, 401, 401]);
      const delays = retries.map((r) => r.delayMs as number);
      expect(delays[0]).toBeGreaterThanOrEqual(500);
      expect(delays[1]).toBeGreaterThan(delays[0]!);
      expect(delays[2]).toBeGreaterThan(delays[1]!);
      const ready = await fetch(`${agent.observability}/readiness`);
      expect(ready.status).toBe(503);
      expect(agent.output).not.toContain(TOKEN);
    } finally {
      agent.kill();
      await kas.close();
    }
  });

  test("kill -9 of kas: the agent reconnects when kas is back on its address", async () => {
    let kas = await spawnStandInKas(0, TOKEN);
    const port = new URL(String((await kas.waitFor((l) => l.event === "listening"))[0]!.url)).port;
    const agent = await agentk(`ws://127.0.0.1:${port}`);
    try {
      await kas.waitFor((l) => l.event === "session");
      await agent.waitFor(msg("connected to kas"));
      kas.kill("SIGKILL");
      await kas.exitCode();
      await agent.waitFor(msg("tunnel to kas closed"));
      kas = await spawnStandInKas(Number(port), TOKEN);
      // The agent's backoff grew while kas was down: allow for a few rounds of it.
      await kas.waitFor((l) => l.event === "session", 1, 40_000);
      await agent.waitFor(msg("connected to kas"), 2);
    } finally {
      agent.kill();
      kas.kill();
    }
  });

  test("kas closes its listener and comes back: the agent reconnects and serves again", async () => {
    let kas = await startStandInKas({ token: TOKEN });
    const { port } = kas;
    const agent = await agentk(`ws://127.0.0.1:${port}`);
    try {
      expect(await hello(kas)).toBe("hello from /ping\n");
      await kas.close();
      await agent.waitFor(msg("tunnel to kas closed"));
      kas = await startStandInKas({ token: TOKEN, port });
      await kas.session();
      expect(await hello(kas)).toBe("hello from /ping\n");
      await agent.waitFor(msg("connected to kas"), 2);
    } finally {
      agent.kill();
      await kas.close();
    }
  });
});
