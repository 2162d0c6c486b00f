// agentk's tunnel under adverse conditions, against the real kas: a proxy in the way, a wrong
// token, kas killed or restarted, no Kubernetes configuration.
import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { gitlabJwt, TOKEN, writeFixtures } from "../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../kas/support/in-process.ts";
import { listenAddressOf, portsEnv, spawnKas } from "../kas/support/kas-process.ts";
import { startConnectProxy } from "../support/connect-proxy.ts";
import { testPki } from "../support/tls-certs.ts";
import { msg, observabilityUrl, spawnAgentk } from "./support/processes.ts";

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
async function agentk(
  kasAddress: string,
  extraArgs: string[] = [],
  env: NodeJS.ProcessEnv = {},
  token = tokenFile,
) {
  const proc = spawnAgentk(
    ["--kas-address", kasAddress, "--token-file", token, "--service", `hello=${serviceUrl}`, ...extraArgs],
    { AGENTK_OBSERVABILITY_LISTEN_ADDRESS: "127.0.0.1:0", ...env },
  );
  return Object.assign(proc, { observability: await observabilityUrl(proc) });
}

/** What GitLab gets from the agent's "hello" service through kas's API. */
async function hello(kas: { addresses: { api?: string } }, apiSecret: Uint8Array): Promise<string> {
  const res = await fetch(`${kas.addresses.api}/api/v1/agents/42/services/hello/ping`, {
    headers: { "gitlab-kas-api-request": await gitlabJwt(apiSecret) },
  });
  return res.text();
}

describe("agentk's tunnel", () => {
  test("through an HTTP CONNECT proxy (HTTPS_PROXY) to a TLS kas; no kube config -> the Kubernetes API is UNAVAILABLE", async () => {
    const pki = await testPki();
    const certFile = join(dir, "kas.pem");
    const keyFile = join(dir, "kas-key.pem");
    await Promise.all([writeFile(certFile, pki.cert), writeFile(keyFile, pki.key)]);
    const kas = await startInProcessKas((c) => {
      c.agent.listen.certificateFile = certFile;
      c.agent.listen.keyFile = keyFile;
    });
    const proxy = await startConnectProxy();
    const caFile = join(dir, "kas-ca.pem");
    await writeFile(caFile, pki.caCert);
    const url = kas.addresses.agent.replace("127.0.0.1", "localhost");
    const agent = await agentk(url, ["--ca-cert-file", caFile], { HTTPS_PROXY: proxy.url });
    try {
      expect(kas.addresses.agent).toMatch(/^wss:\/\/127\.0\.0\.1:/);
      await agent.waitFor(msg("connected to kas"));
      expect(proxy.connects).toEqual([`localhost:${new URL(url).port}`]);
      expect(await hello(kas, kas.apiSecret)).toBe("hello from /ping\n");
      const refused = await fetch(`${kas.addresses.kubernetesApi}/api/v1/namespaces`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(refused.status).toBe(503);
      expect(((await refused.json()) as { message: string }).message).toContain(
        "no Kubernetes configuration",
      );
    } finally {
      agent.kill();
      await kas.close();
      await proxy.close();
    }
  });

  test("wrong token: kas answers 401 and the agent backs off, longer each time", async () => {
    const kas = await startInProcessKas();
    const wrong = join(dir, "wrong-token");
    await writeFile(wrong, "glagent-Hx2Kd9Lm4Np7Qr0St3Vw6Yz1");
    const agent = await agentk(kas.addresses.agent, [], {}, wrong);
    try {
      const retries = await agent.waitFor(msg("cannot reach kas; retrying"), 3);
      expect(retries.map((r) => r.status)).toEqual([401, 401, 401]);
      const delays = retries.map((r) => r.delayMs as number);
      expect(delays[0]).toBeGreaterThanOrEqual(500);
      expect(delays[1]).toBeGreaterThan(delays[0]!);
      expect(delays[2]).toBeGreaterThan(delays[1]!);
      // kas refused each of them (it may have seen one more since).
      const { values } = await kas.kas.metrics.agentAuth.get();
      const refusedAtKas = values.find((v) => v.labels.result === "unauthenticated")?.value ?? 0;
      expect(refusedAtKas).toBeGreaterThanOrEqual(3);
      const ready = await fetch(`${agent.observability}/readiness`);
      expect(ready.status).toBe(503);
      expect(agent.output).not.toContain("glagent-Hx2Kd9Lm4Np7Qr0St3Vw6Yz1");
    } finally {
      agent.kill();
      await kas.close();
    }
  });

  test("kill -9 of kas: the agent reconnects when kas is back on its address", async () => {
    const files = await writeFixtures(dir);
    const env = {
      ...portsEnv(),
      KAS_AGENT_STATIC_TOKENS_FILE: files.tokensFile,
      KAS_API_LISTEN_AUTHENTICATION_SECRET_FILE: files.apiSecretFile,
    };
    let kas = await spawnKas(env);
    const agent = await agentk(kas.addresses.agent);
    try {
      await agent.waitFor(msg("connected to kas"));
      kas.child.kill("SIGKILL");
      await kas.exitCode();
      await agent.waitFor(msg("tunnel to kas closed"));
      kas = await spawnKas({ ...env, KAS_AGENT_LISTEN_ADDRESS: listenAddressOf(kas.addresses.agent) });
      // The agent's backoff grew while kas was down: allow for a few rounds of it.
      await agent.waitFor(msg("connected to kas"), 2, 40_000);
      expect(await hello(kas, files.apiSecret)).toBe("hello from /ping\n");
    } finally {
      agent.kill();
      kas.kill();
    }
  });

  test("kas stops gracefully and comes back: the agent reconnects and serves again", async () => {
    let kas: InProcessKas = await startInProcessKas();
    const address = listenAddressOf(kas.addresses.agent);
    const agent = await agentk(kas.addresses.agent);
    try {
      await agent.waitFor(msg("connected to kas"));
      expect(await hello(kas, kas.apiSecret)).toBe("hello from /ping\n");
      await kas.close();
      await agent.waitFor(msg("tunnel to kas closed"));
      const [host, port] = address.split(":");
      kas = await startInProcessKas((c) => {
        c.agent.listen.address = { host: host!, port: Number(port) };
      });
      await agent.waitFor(msg("connected to kas"), 2, 40_000);
      expect(await hello(kas, kas.apiSecret)).toBe("hello from /ping\n");
    } finally {
      agent.kill();
      await kas.close();
    }
  });
});
