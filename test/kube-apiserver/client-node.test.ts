// The GitOps side of agentk will talk to the API with @kubernetes/client-node: the generic
// KubernetesObjectApi (discovery by kind, server-side apply) and informers must work as they do
// against a real server.
import {
  AppsV1Api,
  KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  makeInformer,
  PatchStrategy,
  type V1Deployment,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type KubeApiServer, startKubeApiServer } from "../support/kube-apiserver.ts";
import { until } from "../support/until.ts";

let api: KubeApiServer;
let kc: KubeConfig;
beforeAll(async () => {
  api = await startKubeApiServer();
  kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "t", server: api.url, caData: Buffer.from(api.caCert).toString("base64") }],
    users: [{ name: "t", token: api.token }],
    contexts: [{ name: "t", cluster: "t", user: "t" }],
    currentContext: "t",
  });
});
afterAll(async () => {
  await api?.close();
});

const deployment = (name: string, replicas: number): KubernetesObject & { spec: object } => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name, namespace: "default" },
  spec: {
    replicas,
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "c", image: "i" }] } },
  },
});

describe("@kubernetes/client-node against the test server", () => {
  test("KubernetesObjectApi: server-side apply by kind, conflicts as ApiException 409, read, list, delete", async () => {
    const objects = KubernetesObjectApi.makeApiClient(kc);
    const applied = await objects.patch(
      deployment("gitops", 1),
      undefined,
      undefined,
      "gitops",
      false,
      PatchStrategy.ServerSideApply,
    );
    expect(applied.metadata?.managedFields?.[0]).toMatchObject({ manager: "gitops", operation: "Apply" });
    const conflict = await objects
      .patch(
        deployment("gitops", 2),
        undefined,
        undefined,
        "someone-else",
        false,
        PatchStrategy.ServerSideApply,
      )
      .catch((e: { code?: number; body?: string }) => e);
    expect((conflict as { code?: number }).code).toBe(409);
    expect(JSON.parse((conflict as { body: string }).body)).toMatchObject({
      reason: "Conflict",
      details: { causes: [{ field: ".spec.replicas" }] },
    });
    const forced = (await objects.patch(
      deployment("gitops", 2),
      undefined,
      undefined,
      "someone-else",
      true,
      PatchStrategy.ServerSideApply,
    )) as V1Deployment;
    expect(forced.spec?.replicas).toBe(2);
    const read = (await objects.read({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "gitops", namespace: "default" },
    })) as V1Deployment;
    expect(read.spec?.replicas).toBe(2);
    expect(
      (await objects.list("apps/v1", "Deployment", "default")).items.map((o) => o.metadata?.name),
    ).toEqual(["gitops"]);
    await objects.delete({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "gitops", namespace: "default" },
    });
    expect(api.store.has("deployments", "default", "gitops")).toBe(false);
  });

  test("an informer on deployments sees adds, updates (status included) and deletes", async () => {
    const apps = kc.makeApiClient(AppsV1Api);
    const informer = makeInformer(kc, "/apis/apps/v1/deployments", () =>
      apps.listDeploymentForAllNamespaces(),
    );
    const seen: string[] = [];
    informer.on("add", (o) => seen.push(`add ${o.metadata?.name}`));
    informer.on("update", (o) =>
      seen.push(`update ${o.metadata?.name} ready=${o.status?.readyReplicas ?? 0}`),
    );
    informer.on("delete", (o) => seen.push(`delete ${o.metadata?.name}`));
    await informer.start();
    try {
      await apps.createNamespacedDeployment({
        namespace: "default",
        body: deployment("watched", 2) as V1Deployment,
      });
      await until(() => seen.includes("add watched"), 10_000, "the informer's add");
      api.setDeploymentReady("default", "watched", true);
      await until(() => seen.includes("update watched ready=2"), 10_000, "the informer's update");
      await apps.deleteNamespacedDeployment({ namespace: "default", name: "watched" });
      await until(() => seen.includes("delete watched"), 10_000, `the informer's delete; saw ${seen}`);
    } finally {
      await informer.stop();
    }
  });
});
