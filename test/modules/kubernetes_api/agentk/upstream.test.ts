// agentk's own Kubernetes credentials, from each kind of configuration, against the test API server.

import { once } from "node:events";
import fs from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from "vitest";
import { parse, stringify } from "yaml";
import { kubernetesUpstream } from "../../../../modules/kubernetes_api/agentk/upstream.ts";
import { encodeIdentity } from "../../../../modules/kubernetes_api/identity.ts";
import type { Upstream } from "../../../../tool/http/proxy/index.ts";
import { startConnectProxy } from "../../../support/connect-proxy.ts";
import { type KubeApiServer, startKubeApiServer } from "../../../support/kube-apiserver.ts";
import { kubeconfigYaml } from "../../../support/kubeconfig.ts";
import { makePki } from "../../../support/tls-certs.ts";

let api: KubeApiServer;
let dir: string;
beforeAll(async () => {
  api = await startKubeApiServer();
  dir = await mkdtemp(join(tmpdir(), "agentk-upstream-"));
});
afterAll(async () => {
  await api.close();
  await rm(dir, { recursive: true, force: true });
});
afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

/** Short enough to show it is the option, not client-node's own minute, that rules. */
const REFRESH_MS = 5_000;

/** Freezes the clock the refresh interval is measured on; network I/O keeps real time. */
function freezeClock(): { advance(ms: number): void } {
  vi.useFakeTimers({ toFake: ["Date"] });
  return { advance: (ms) => vi.setSystemTime(Date.now() + ms) };
}

/** The in-cluster configuration of a pod: the token and CA files of its service account. */
async function inCluster(server: KubeApiServer, name: string) {
  const tokenFile = join(dir, `${name}-token`);
  const caFile = join(dir, `${name}-ca.crt`);
  await writeFile(tokenFile, `${server.token}\n`);
  await writeFile(caFile, server.caCert);
  return { kind: "in-cluster" as const, server: server.url, tokenFile, caFile };
}

/** A kubeconfig for `api` with `cluster` fields added and, if given, another `user` (kubectl's names). */
async function kubeconfigWith(name: string, extra: { cluster?: object; user?: object }): Promise<string> {
  const doc = parse(kubeconfigYaml({ server: api.url, caCert: api.caCert, token: api.token }));
  Object.assign(doc.clusters[0].cluster, extra.cluster);
  if (extra.user) doc.users[0].user = extra.user;
  const path = join(dir, name);
  await writeFile(path, stringify(doc));
  return path;
}

/** The Authorization the API server saw on the last request. */
const lastAuthorization = (server: KubeApiServer) => server.requests.at(-1)?.headers.authorization;

/** kas's identity header for a request as the agent itself. */
const AS_AGENT = encodeIdentity({ as: "agent" });

/** GET `path` on the upstream as agentk's proxy would: its agent (TLS), its headers. */
async function get(
  upstream: Upstream,
  path: string,
  incoming: Record<string, string> = {},
  identity: string | undefined = AS_AGENT,
) {
  const { agent, headers } = await upstream.prepare(incoming, identity);
  const req = request(new URL(path, upstream.url), { agent: agent as never, headers }).end();
  const [res] = (await once(req, "response", { signal: AbortSignal.timeout(10_000) })) as [IncomingMessage];
  res.resume();
  await once(res, "end");
  return { status: res.statusCode, headers };
}

/** Starts GET `path` and returns the response as soon as its head is in (a watch's body streams on). */
async function open(upstream: Upstream, path: string): Promise<IncomingMessage> {
  const { agent, headers } = await upstream.prepare({}, AS_AGENT);
  const req = request(new URL(path, upstream.url), { agent: agent as never, headers }).end();
  const [res] = (await once(req, "response", { signal: AbortSignal.timeout(10_000) })) as [IncomingMessage];
  return res;
}

describe("agentk's Kubernetes upstream", () => {
  test("none: no upstream", async () => {
    expect(await kubernetesUpstream({ kind: "none" })).toBeUndefined();
  });

  test("kubeconfig: the file's server, CA and token; incoming Authorization and Impersonate-* replaced by kas's identity", async () => {
    const upstream = (await kubernetesUpstream({
      kind: "kubeconfig",
      paths: [await api.writeKubeconfig(join(dir, "kubeconfig"))],
    }))!;
    expect(upstream.url.href).toBe(`${api.url}/`);
    const incoming = {
      authorization: "Bearer from-kas",
      cookie: "a=b",
      "impersonate-user": "jane",
      accept: "x",
    };
    const asAgent = await get(upstream, "/api/v1/namespaces", incoming);
    expect(asAgent.status).toBe(200);
    expect(asAgent.headers).toEqual({ authorization: `Bearer ${api.token}`, accept: "x" });

    const who = {
      username: "gitlab:ci_job:1",
      groups: ["gitlab:ci_job"],
      extra: [{ key: "a.b/C", val: ["1", "2"] }],
    };
    const asJob = await get(
      upstream,
      "/api/v1/namespaces",
      incoming,
      encodeIdentity({ as: "impersonate", who }),
    );
    expect(asJob.status).toBe(200);
    expect(asJob.headers).toEqual({
      authorization: `Bearer ${api.token}`,
      accept: "x",
      "impersonate-user": "gitlab:ci_job:1",
      "impersonate-group": ["gitlab:ci_job"],
      "impersonate-extra-a.b%2Fc": ["1", "2"],
    });
    expect(api.requests.at(-1)?.impersonation).toEqual({
      username: "gitlab:ci_job:1",
      groups: ["gitlab:ci_job"],
      extra: { "a.b/c": ["1", "2"] },
    });
  });

  test("no identity from kas, or one it cannot read: refused (403), never sent as agentk itself", async () => {
    const upstream = (await kubernetesUpstream({
      kind: "kubeconfig",
      paths: [await api.writeKubeconfig(join(dir, "kubeconfig-refuse"))],
    }))!;
    for (const identity of [
      undefined,
      "",
      "not json",
      `${AS_AGENT}, ${AS_AGENT}`,
      Buffer.from('{"v":1,"as":"root"}').toString("base64url"),
    ]) {
      await expect(upstream.prepare({}, identity)).rejects.toMatchObject({ status: 403 });
    }
  });

  test("a kubeconfig user with `as`: kas's impersonation replaces it whole, never a mix of both", async () => {
    const path = await kubeconfigWith("kubeconfig-as", {
      user: { token: api.token, as: "agentk-operator", "as-groups": ["operators"] },
    });
    const upstream = (await kubernetesUpstream({ kind: "kubeconfig", paths: [path] }))!;
    const own = await get(upstream, "/api");
    expect(own.headers).toMatchObject({ "impersonate-user": "agentk-operator" });
    const who = { username: "deployer", groups: [], extra: [] };
    const asKas = await get(upstream, "/api", {}, encodeIdentity({ as: "impersonate", who }));
    expect(Object.keys(asKas.headers).filter((n) => n.startsWith("impersonate-"))).toEqual([
      "impersonate-user",
    ]);
    expect(asKas.headers["impersonate-user"]).toBe("deployer");
  });

  test("several kubeconfig files: merged, the first one's current context wins", async () => {
    const first = await api.writeKubeconfig(join(dir, "a"), { name: "a" });
    const second = await api.writeKubeconfig(join(dir, "b"), {
      name: "b",
      token: "other",
      server: "https://127.0.0.1:1",
    });
    const upstream = (await kubernetesUpstream({ kind: "kubeconfig", paths: [first, second] }))!;
    expect((await get(upstream, "/api")).status).toBe(200);
  });

  test("in-cluster: the service account token file and CA", async () => {
    const tokenFile = join(dir, "sa-token");
    const caFile = join(dir, "sa-ca.crt");
    await writeFile(tokenFile, api.token);
    await writeFile(caFile, api.caCert);
    const upstream = (await kubernetesUpstream({ kind: "in-cluster", server: api.url, tokenFile, caFile }))!;
    const { status, headers } = await get(upstream, "/api/v1/namespaces/default");
    expect(status).toBe(200);
    expect(headers.authorization).toBe(`Bearer ${api.token}`);
  });

  test("a plain-http server without insecure-skip-tls-verify is refused, as client-node does", async () => {
    const path = await api.writeKubeconfig(join(dir, "http"), {
      server: "http://127.0.0.1:8001",
      caCert: "",
    });
    await expect(kubernetesUpstream({ kind: "kubeconfig", paths: [path] })).rejects.toThrow(
      /HTTP protocol is not allowed/,
    );
  });

  test("in-cluster: a rotated service-account token is sent once the refresh interval has passed", async () => {
    const clock = freezeClock();
    const source = await inCluster(api, "rotating");
    const upstream = (await kubernetesUpstream(source, { refreshMs: REFRESH_MS }))!;
    expect((await get(upstream, "/api")).status).toBe(200);
    expect(lastAuthorization(api)).toBe(`Bearer ${api.token}`);

    await writeFile(source.tokenFile, "rotated-token\n");
    await get(upstream, "/api");
    expect(lastAuthorization(api)).toBe(`Bearer ${api.token}`); // not re-read per request

    clock.advance(REFRESH_MS + 1);
    await get(upstream, "/api");
    expect(lastAuthorization(api)).toBe("Bearer rotated-token");
    upstream.destroy();
  });

  test("a failed re-read keeps the previous credentials and says so", async () => {
    const clock = freezeClock();
    const source = await inCluster(api, "vanishing");
    const warnings: { obj: object; msg: string }[] = [];
    const log = { warn: (obj: object, msg: string) => void warnings.push({ obj, msg }) };
    const upstream = (await kubernetesUpstream(source, { refreshMs: REFRESH_MS, log }))!;
    await rm(source.tokenFile);
    clock.advance(REFRESH_MS + 1);
    expect((await get(upstream, "/api")).status).toBe(200);
    expect(lastAuthorization(api)).toBe(`Bearer ${api.token}`);
    expect(warnings).toEqual([
      {
        obj: expect.objectContaining({ server: api.url, err: expect.objectContaining({ code: "ENOENT" }) }),
        msg: "cannot refresh the Kubernetes credentials; still using the previous ones",
      },
    ]);
    upstream.destroy();
  });

  test("kubeconfig: a user's token-file is re-read too (client-node reads it once)", async () => {
    const clock = freezeClock();
    const tokenFile = join(dir, "user-token");
    await writeFile(tokenFile, api.token);
    const path = await kubeconfigWith("token-file", { user: { "token-file": tokenFile } });
    const upstream = (await kubernetesUpstream(
      { kind: "kubeconfig", paths: [path] },
      { refreshMs: REFRESH_MS },
    ))!;
    expect((await get(upstream, "/api")).status).toBe(200);

    await writeFile(tokenFile, "rotated-user-token");
    clock.advance(REFRESH_MS + 1);
    await get(upstream, "/api");
    expect(lastAuthorization(api)).toBe("Bearer rotated-user-token");
    upstream.destroy();
  });

  test("the CA and token files are read once per refresh interval, not per request", async () => {
    const clock = freezeClock();
    const source = await inCluster(api, "counted");
    const upstream = (await kubernetesUpstream(source, { refreshMs: REFRESH_MS }))!;
    const reads = vi.spyOn(fs, "readFileSync");
    const caReads = () => reads.mock.calls.filter(([file]) => file === source.caFile).length;
    for (let i = 0; i < 5; i++) expect((await get(upstream, "/api")).status).toBe(200);
    expect(caReads()).toBe(0);

    clock.advance(REFRESH_MS + 1);
    expect((await get(upstream, "/api")).status).toBe(200);
    expect(caReads()).toBe(1);
    upstream.destroy();
  });

  test("CA rotation: new connections trust the new CA once it is re-read; a watch on the old one runs on", async () => {
    const clock = freezeClock();
    const rotating = await startKubeApiServer();
    try {
      const source = await inCluster(rotating, "ca-rotation");
      const upstream = (await kubernetesUpstream(source, { refreshMs: REFRESH_MS }))!;
      const watch = await open(upstream, "/api/v1/namespaces?watch=1");
      expect(watch.statusCode).toBe(200);
      let events = "";
      watch.on("data", (chunk: Buffer) => {
        events += chunk;
      });

      const next = await makePki();
      rotating.useCertificate(next);
      await writeFile(source.caFile, next.caCert);
      clock.advance(REFRESH_MS + 1);
      expect((await get(upstream, "/api/v1/namespaces")).status).toBe(200);

      rotating.store.create("namespaces", undefined, { metadata: { name: "after-rotation" } });
      // The clock is frozen, so a deadline on real timers rather than `until`.
      while (!events.includes('"name":"after-rotation"')) {
        await once(watch, "data", { signal: AbortSignal.timeout(10_000) });
      }
      upstream.destroy();
    } finally {
      await rotating.close();
    }
  });

  test("proxy-url: the API server is reached through the HTTP CONNECT proxy", async () => {
    const proxy = await startConnectProxy();
    try {
      const path = await kubeconfigWith("proxied", { cluster: { "proxy-url": proxy.url } });
      const upstream = (await kubernetesUpstream({ kind: "kubeconfig", paths: [path] }))!;
      expect((await get(upstream, "/api/v1/namespaces")).status).toBe(200);
      expect(proxy.connects).toEqual([new URL(api.url).host]);
      upstream.destroy();
    } finally {
      await proxy.close();
    }
  });

  test("a proxy-url that is not an HTTP proxy is refused at start", async () => {
    const path = await kubeconfigWith("socks", { cluster: { "proxy-url": "socks5://127.0.0.1:1080" } });
    await expect(kubernetesUpstream({ kind: "kubeconfig", paths: [path] })).rejects.toThrow(
      /proxy-url must be an http:\/\/ or https:\/\/ proxy/,
    );
  });
});
