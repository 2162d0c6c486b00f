// agentk's own Kubernetes client (leader election, GitOps) keeps its TLS connections alive:
// client-node 1.4.0 alone opens a new one for every request.

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, expect, test } from "vitest";
import { agentkClientConfig } from "../../../../modules/kubernetes_api/agentk/kubeconfig.ts";
import { type KubeApiServer, startKubeApiServer } from "../../../support/kube-apiserver.ts";

let api: KubeApiServer;
let dir: string;
beforeAll(async () => {
  api = await startKubeApiServer();
  dir = await mkdtemp(join(tmpdir(), "agentk-keepalive-"));
});
afterAll(async () => {
  await api.close();
  await rm(dir, { recursive: true, force: true });
});

test("consecutive requests share one connection; a changed CA gets a new agent and still works", async () => {
  const path = await api.writeKubeconfig(join(dir, "kubeconfig"));
  const kc = await agentkClientConfig({ kind: "kubeconfig", paths: [path] });
  const core = kc!.makeApiClient(CoreV1Api);
  const before = api.connections;
  for (let i = 0; i < 5; i++) {
    await core.createNamespace({ body: { metadata: { name: `keepalive-${i}` } } });
    await core.readNamespace({ name: `keepalive-${i}` });
  }
  expect(api.connections - before).toBe(1);

  // The TLS options are read per request as before: another CA bundle (the same CA twice) is
  // another agent, hence one new connection, and requests go on.
  const cluster = kc!.clusters[0]!;
  kc!.clusters[0] = { ...cluster, caData: Buffer.from(`${api.caCert}\n${api.caCert}`).toString("base64") };
  const listed = await core.listNamespace();
  expect(listed.items.map((n) => n.metadata?.name)).toContain("keepalive-4");
  expect(api.connections - before).toBe(2);
});
