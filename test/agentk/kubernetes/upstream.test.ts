// agentk's own Kubernetes credentials, from each kind of configuration, against the test API server.

import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { kubernetesUpstream } from "../../../cmd/agentk/kubernetes/index.ts";
import type { Upstream } from "../../../cmd/agentk/proxy/forward.ts";
import { type KubeApiServer, startKubeApiServer } from "../../support/kube-apiserver.ts";

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

/** GET `path` on the upstream as agentk's proxy would: its agent (TLS), its headers. */
async function get(upstream: Upstream, path: string, incoming: Record<string, string> = {}) {
  const headers = await upstream.headers(incoming);
  const req = request(new URL(path, upstream.url), { agent: upstream.agent as never, headers }).end();
  const [res] = (await once(req, "response", { signal: AbortSignal.timeout(10_000) })) as [IncomingMessage];
  res.resume();
  return { status: res.statusCode, headers };
}

describe("agentk's Kubernetes upstream", () => {
  test("none: no upstream", async () => {
    expect(await kubernetesUpstream({ kind: "none" })).toBeUndefined();
  });

  test("kubeconfig: the file's server, CA and token; incoming Authorization replaced, Impersonate-* kept", async () => {
    const upstream = (await kubernetesUpstream({
      kind: "kubeconfig",
      paths: [await api.writeKubeconfig(join(dir, "kubeconfig"))],
    }))!;
    expect(upstream.url.href).toBe(`${api.url}/`);
    const { status, headers } = await get(upstream, "/api/v1/namespaces", {
      authorization: "Bearer from-kas",
      "impersonate-user": "jane",
    });
    expect(status).toBe(200);
    expect(headers).toEqual({ authorization: `Bearer ${api.token}`, "impersonate-user": "jane" });
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
});
