// The GitOps applier against the Kubernetes test server, with the real @kubernetes/client-node:
// server-side apply, ordering (CRDs and Namespaces first), inventories and pruning, ownership
// between projects, dry runs, readiness and the reconcile timeout.
import { KubernetesObjectApi, PatchStrategy } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  Applier,
  type ApplierEvent,
  inventoryLocation,
  OWNING_INVENTORY_ANNOTATION,
  type SyncOutcome,
} from "../../../../modules/gitops/agentk/applier/index.ts";
import { type KubeApiServer, startKubeApiServer } from "../../../support/kube-apiserver.ts";
import { configMap, deployment, kubeConfigFor, namespace, project, yamlDocs } from "./helpers.ts";

let api: KubeApiServer;
let applier: Applier;
const listeners = new Set<(e: ApplierEvent) => void>();

beforeAll(async () => {
  api = await startKubeApiServer();
  applier = new Applier({
    kc: kubeConfigFor(api),
    owner: "test-agent",
    pollIntervalMs: 5,
    onEvent: (e) => {
      for (const l of listeners) l(e);
    },
  });
});
afterAll(async () => {
  await api?.close();
});

const files = (entries: Record<string, string>) => new Map(Object.entries(entries));
const statuses = (r: SyncOutcome) =>
  Object.fromEntries(r.objects.map((o) => [`${o.kind}/${o.namespace}/${o.name}`, o.status]));
const inventoryOf = (projectId: string, ns = "default") => {
  const loc = inventoryLocation("test-agent", projectId, ns);
  return api.store.has("configmaps", loc.namespace, loc.name)
    ? Object.keys(api.store.get("configmaps", loc.namespace, loc.name).data as object).sort()
    : undefined;
};

const crd = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "widgets.example.com" },
  spec: {
    group: "example.com",
    scope: "Namespaced",
    names: { plural: "widgets", singular: "widget", kind: "Widget", listKind: "WidgetList" },
    versions: [
      {
        name: "v1",
        served: true,
        storage: true,
        schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
      },
    ],
  },
};
const gadgets = {
  ...crd,
  metadata: { name: "gadgets.example.com" },
  spec: { ...crd.spec, names: { plural: "gadgets", singular: "gadget", kind: "Gadget" } },
};
const widget = (name: string, ns: string, size: number) => ({
  apiVersion: "example.com/v1",
  kind: "Widget",
  metadata: { name, namespace: ns },
  spec: { size },
});

/** 24 objects across three namespaces: a CRD and its custom resources (in a file read before the CRD's). */
function bigProject(change = 0): Record<string, string> {
  const cms = [];
  for (let i = 0; i < 13; i++) {
    const ns = i % 3 === 0 ? undefined : i % 3 === 1 ? "team-a" : "team-b";
    cms.push(configMap(`settings-${i}`, ns, { index: String(i), version: i === 0 ? String(change) : "0" }));
  }
  return {
    "a-widgets.yaml": yamlDocs(
      widget("w1", "team-a", 1),
      widget("w2", "team-b", 2),
      widget("w3", "team-a", 3),
    ),
    "crds/widgets.yaml": yamlDocs(crd),
    "namespaces.yaml": yamlDocs(namespace("team-a"), namespace("team-b"), namespace("team-c")),
    "config/maps.yaml": yamlDocs(...cms),
    "services.json": JSON.stringify({
      apiVersion: "v1",
      kind: "List",
      items: [
        {
          apiVersion: "v1",
          kind: "Service",
          metadata: { name: "web", namespace: "team-a" },
          spec: { ports: [{ port: 80 }] },
        },
        {
          apiVersion: "v1",
          kind: "Service",
          metadata: { name: "web", namespace: "team-b" },
          spec: { ports: [{ port: 80 }] },
        },
      ],
    }),
    "rbac.yaml": `${yamlDocs(
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole",
        metadata: { name: "widget-reader" },
        rules: [{ apiGroups: ["example.com"], resources: ["widgets"], verbs: ["get"] }],
      },
      {
        apiVersion: "v1",
        kind: "ServiceAccount",
        metadata: { name: "reader", namespace: "team-c" },
      },
    )}---\n# an empty document\n---\n`,
  };
}

describe("the applier", () => {
  const big = project("group/big", { default_namespace: "team-c" });

  test("applies 24 objects across namespaces: the CRD and Namespaces first, then its custom resources", async () => {
    const from = api.requests.length;
    const result = await applier.apply({ project: big, files: files(bigProject()) });
    expect(result.error).toBe("");
    expect(result.objects).toHaveLength(24);
    expect(result.objects.every((o) => o.status === "applied")).toBe(true);
    // Ordering: the CRD, then Namespaces, then other cluster-scoped, then namespaced objects.
    expect(result.objects.slice(0, 5).map((o) => o.kind)).toEqual([
      "CustomResourceDefinition",
      "Namespace",
      "Namespace",
      "Namespace",
      "ClusterRole",
    ]);
    const patches = api.requests.slice(from).filter((r) => r.method === "PATCH");
    expect(patches[0]!.path).toMatch(/customresourcedefinitions\/widgets.example.com\?/);
    expect(patches[0]!.headers["content-type"]).toBe("application/apply-patch+yaml");
    expect(patches[0]!.path).toContain("fieldManager=agentk");
    expect(patches[0]!.path).toContain("force=true");
    // Objects without a namespace go to default_namespace; each carries its inventory.
    const id = inventoryLocation("test-agent", "group/big", "team-c").id;
    const cm = api.store.get("configmaps", "team-c", "settings-0");
    expect(cm.metadata.annotations?.[OWNING_INVENTORY_ANNOTATION]).toBe(id);
    expect(cm.metadata.managedFields?.[0]).toMatchObject({ manager: "agentk", operation: "Apply" });
    expect(api.store.get("widgets.example.com", "team-b", "w2").spec).toEqual({ size: 2 });
    expect(api.store.has("services", "team-b", "web")).toBe(true);
    expect(api.store.has("clusterroles", undefined, "widget-reader")).toBe(true);
    const inventory = inventoryOf("group/big", "team-c")!;
    expect(inventory).toHaveLength(24);
    expect(inventory).toContain("team-a_w1_example.com_Widget");
    expect(inventory).toContain("_widgets.example.com_apiextensions.k8s.io_CustomResourceDefinition");
    expect(
      api.store.get("configmaps", "team-c", inventoryLocation("test-agent", "group/big", "team-c").name)
        .metadata.labels,
    ).toEqual({ "cli-utils.sigs.k8s.io/inventory-id": id });
  });

  test("a change is applied; the rest is unchanged", async () => {
    const before = api.store.resourceVersion;
    const result = await applier.apply({ project: big, files: files(bigProject(1)) });
    expect(result.error).toBe("");
    const s = statuses(result);
    expect(s["ConfigMap/team-c/settings-0"]).toBe("applied");
    expect(Object.entries(s).filter(([, v]) => v !== "unchanged")).toEqual([
      ["ConfigMap/team-c/settings-0", "applied"],
    ]);
    expect(api.store.get("configmaps", "team-c", "settings-0").data).toEqual({ index: "0", version: "1" });
    expect(api.store.resourceVersion).toBe(before + 1); // one write, nothing else touched
  });

  test("a file removed: its objects are pruned, the inventory shrinks", async () => {
    const { "a-widgets.yaml": _widgets, ...rest } = bigProject(1);
    const result = await applier.apply({ project: big, files: files(rest) });
    expect(result.error).toBe("");
    const pruned = result.objects.filter((o) => o.status === "pruned").map((o) => `${o.namespace}/${o.name}`);
    expect(pruned.sort()).toEqual(["team-a/w1", "team-a/w3", "team-b/w2"]);
    expect(api.store.has("widgets.example.com", "team-a", "w1")).toBe(false);
    expect(api.store.has("widgets.example.com", "team-b", "w2")).toBe(false);
    expect(inventoryOf("group/big", "team-c")).toHaveLength(21);
    const deletes = api.requests.filter((r) => r.method === "DELETE" && r.path.includes("/widgets/"));
    expect(deletes).toHaveLength(3);
  });

  test("manual drift by another field manager is reverted on the next apply", async () => {
    const objects = KubernetesObjectApi.makeApiClient(kubeConfigFor(api));
    await objects.patch(
      {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "settings-1", namespace: "team-a" },
        data: { index: "tampered" },
      },
      undefined,
      undefined,
      "kubectl-edit",
      undefined,
      PatchStrategy.MergePatch,
    );
    expect(api.store.get("configmaps", "team-a", "settings-1").data).toMatchObject({ index: "tampered" });
    const { "a-widgets.yaml": _widgets, ...rest } = bigProject(1);
    const result = await applier.apply({ project: big, files: files(rest) });
    expect(statuses(result)["ConfigMap/team-a/settings-1"]).toBe("applied");
    expect(api.store.get("configmaps", "team-a", "settings-1").data).toEqual({ index: "1", version: "0" });
    expect(Object.entries(statuses(result)).filter(([, v]) => v === "applied")).toEqual([
      ["ConfigMap/team-a/settings-1", "applied"],
    ]);
  });

  test("invalid YAML, an incomplete object and one the API refuses are reported; the rest is applied, nothing pruned", async () => {
    const p = project("group/broken", { default_namespace: "broken" });
    const first = await applier.apply({
      project: p,
      files: files({
        "ns.yaml": yamlDocs(namespace("broken")),
        "old.yaml": yamlDocs(configMap("old", "broken", {})),
      }),
    });
    expect(first.error).toBe("");
    const result = await applier.apply({
      project: p,
      files: files({
        "ns.yaml": yamlDocs(namespace("broken")),
        "mixed.yaml": [
          yamlDocs(configMap("good-1", undefined, { a: "1" })),
          "foo: [unclosed\n",
          yamlDocs({ apiVersion: "v1", kind: "ConfigMap", metadata: {} }),
          yamlDocs(configMap("-bad-name", undefined, {})),
          yamlDocs(configMap("good-2", undefined, { a: "2" })),
        ].join("---\n"),
        "alias-bomb.yaml": `a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n`,
        "unknown.yaml": yamlDocs({
          apiVersion: "nothing.example/v1",
          kind: "Ghost",
          metadata: { name: "g" },
        }),
      }),
    });
    const failed = result.objects.filter((o) => o.status === "failed");
    expect(failed.map((o) => o.error)).toEqual([
      expect.stringMatching(/^alias-bomb.yaml: document 0: invalid YAML: .*alias/i),
      expect.stringMatching(/^mixed.yaml: document 1: invalid YAML/),
      "mixed.yaml: document 2: object without metadata.name",
      "the cluster does not serve nothing.example/v1 Ghost",
      expect.stringMatching(/^HTTP 422: ConfigMap "-bad-name" is invalid/),
    ]);
    expect(failed.at(-1)).toMatchObject({
      kind: "ConfigMap",
      namespace: "broken",
      name: "-bad-name",
      source: "mixed.yaml",
    });
    expect(statuses(result)).toMatchObject({
      "ConfigMap/broken/good-1": "applied",
      "ConfigMap/broken/good-2": "applied",
    });
    expect(api.store.get("configmaps", "broken", "good-2").data).toEqual({ a: "2" });
    // An unreadable document might have held "old": nothing is pruned while documents are unreadable.
    expect(result.error).toMatch(/could not be read; nothing is pruned/);
    expect(api.store.has("configmaps", "broken", "old")).toBe(true);
    expect(inventoryOf("group/broken", "broken")).toContain("broken_old__ConfigMap");
  });

  test("two projects stay isolated: neither prunes the other's objects; ownership per inventory_policy", async () => {
    const a = project("group/a", { default_namespace: "shared" });
    const b = project("group/b", { default_namespace: "shared" });
    const ns = yamlDocs(namespace("shared"));
    await applier.apply({
      project: a,
      files: files({
        "ns.yaml": ns,
        "a.yaml": yamlDocs(configMap("a-1", undefined, {}), configMap("common", undefined, { by: "a" })),
      }),
    });
    // B claims "common", which A owns: must_match skips it.
    const rb = await applier.apply({
      project: b,
      files: files({
        "b.yaml": yamlDocs(configMap("b-1", undefined, {}), configMap("common", undefined, { by: "b" })),
      }),
    });
    expect(statuses(rb)).toEqual({ "ConfigMap/shared/b-1": "applied", "ConfigMap/shared/common": "skipped" });
    expect(rb.objects.find((o) => o.name === "common")!.error).toMatch(
      /belongs to another inventory \(gitops-/,
    );
    expect(api.store.get("configmaps", "shared", "common").data).toEqual({ by: "a" });
    expect(inventoryOf("group/b", "shared")).toEqual(["shared_b-1__ConfigMap"]);
    // A drops a-1: pruned; B's b-1 is not A's to prune.
    const ra = await applier.apply({
      project: a,
      files: files({ "ns.yaml": ns, "a.yaml": yamlDocs(configMap("common", undefined, { by: "a" })) }),
    });
    expect(ra.objects.filter((o) => o.status === "pruned").map((o) => o.name)).toEqual(["a-1"]);
    expect(api.store.has("configmaps", "shared", "b-1")).toBe(true);
    // B empties itself: b-1 pruned, A's objects untouched.
    const rb2 = await applier.apply({ project: b, files: files({}) });
    expect(statuses(rb2)).toEqual({ "ConfigMap/shared/b-1": "pruned" });
    expect(api.store.has("configmaps", "shared", "common")).toBe(true);
    expect(api.store.has("namespaces", undefined, "shared")).toBe(true);
    // adopt_all takes "common" from A; A then skips it (and no longer lists it) and never prunes it.
    const rb3 = await applier.apply({
      project: { ...b, inventory_policy: "adopt_all" },
      files: files({ "b.yaml": yamlDocs(configMap("common", undefined, { by: "b" })) }),
    });
    expect(statuses(rb3)).toEqual({ "ConfigMap/shared/common": "applied" });
    expect(api.store.get("configmaps", "shared", "common").data).toEqual({ by: "b" });
    const ra2 = await applier.apply({ project: a, files: files({ "ns.yaml": ns }) });
    expect(statuses(ra2)).toMatchObject({
      "ConfigMap/shared/common": "skipped",
      "Namespace//shared": "unchanged",
    });
    expect(api.store.get("configmaps", "shared", "common").data).toEqual({ by: "b" });
    // An object that belongs to no inventory: must_match leaves it, adopt_if_no_inventory adopts it.
    api.store.create("configmaps", "shared", configMap("hand-made", "shared", { by: "hand" }));
    const handMade = files({ "h.yaml": yamlDocs(configMap("hand-made", undefined, { by: "git" })) });
    const mustMatch = await applier.apply({
      project: project("group/c", { default_namespace: "shared" }),
      files: handMade,
    });
    expect(mustMatch.objects[0]).toMatchObject({
      status: "skipped",
      error: expect.stringMatching(/belongs to no inventory/),
    });
    const adopt = await applier.apply({
      project: project("group/c", { default_namespace: "shared", inventory_policy: "adopt_if_no_inventory" }),
      files: handMade,
    });
    expect(statuses(adopt)).toEqual({ "ConfigMap/shared/hand-made": "applied" });
    expect(api.store.get("configmaps", "shared", "hand-made").data).toEqual({ by: "git" });
    // …but not one of another inventory's.
    const notOthers = await applier.apply({
      project: project("group/c", { default_namespace: "shared", inventory_policy: "adopt_if_no_inventory" }),
      files: files({
        ...Object.fromEntries(handMade),
        "x.yaml": yamlDocs(configMap("common", undefined, { by: "c" })),
      }),
    });
    expect(statuses(notOthers)["ConfigMap/shared/common"]).toBe("skipped");
  });

  test.each(["server", "client"] as const)(
    "dry run (%s) writes nothing, inventory neither",
    async (strategy) => {
      const p = project(`group/dry-${strategy}`, { default_namespace: `dry-${strategy}` });
      const before = api.store.resourceVersion;
      const from = api.requests.length;
      const result = await applier.apply({
        project: { ...p, dry_run_strategy: strategy },
        files: files({
          "a.yaml": yamlDocs(
            namespace(`dry-${strategy}`),
            configMap(`dry-${strategy}`, "default", { a: "1" }),
          ),
          // A CRD and one of its resources: the server cannot check the resource (its CRD is not written).
          "b.yaml": yamlDocs(gadgets, {
            apiVersion: "example.com/v1",
            kind: "Gadget",
            metadata: { name: "g", namespace: "default" },
          }),
        }),
      });
      expect(result.dryRun).toBe(true);
      expect(result.error).toBe("");
      expect(result.objects.map((o) => o.status)).toEqual(["applied", "applied", "applied", "applied"]);
      expect(api.store.resourceVersion).toBe(before);
      expect(api.store.has("namespaces", undefined, `dry-${strategy}`)).toBe(false);
      expect(inventoryOf(`group/dry-${strategy}`, `dry-${strategy}`)).toBeUndefined();
      const writes = api.requests.slice(from).filter((r) => r.method !== "GET");
      if (strategy === "client") expect(writes).toEqual([]);
      else expect(writes.every((r) => r.path.includes("dryRun=All"))).toBe(true);
    },
  );

  test("a dry run reports what it would prune and leaves it", async () => {
    const p = project("group/dry-prune", { default_namespace: "default" });
    await applier.apply({
      project: p,
      files: files({
        "a.yaml": yamlDocs(configMap("dp-1", undefined, {}), configMap("dp-2", undefined, {})),
      }),
    });
    for (const strategy of ["server", "client"] as const) {
      const before = api.store.resourceVersion;
      const result = await applier.apply({
        project: { ...p, dry_run_strategy: strategy },
        files: files({ "a.yaml": yamlDocs(configMap("dp-1", undefined, { changed: "yes" })) }),
      });
      expect(statuses(result)).toEqual({
        "ConfigMap/default/dp-1": "applied",
        "ConfigMap/default/dp-2": "pruned",
      });
      expect(api.store.resourceVersion).toBe(before);
      expect(api.store.has("configmaps", "default", "dp-2")).toBe(true);
    }
    // Server dry run tells a no-op from a change.
    const same = await applier.apply({
      project: { ...p, dry_run_strategy: "server" },
      files: files({
        "a.yaml": yamlDocs(configMap("dp-1", undefined, {}), configMap("dp-2", undefined, {})),
      }),
    });
    expect(statuses(same)).toEqual({
      "ConfigMap/default/dp-1": "unchanged",
      "ConfigMap/default/dp-2": "unchanged",
    });
  });

  test("prune off keeps what left Git (and keeps it in the inventory)", async () => {
    const p = project("group/keep", { prune: false });
    await applier.apply({
      project: p,
      files: files({ "a.yaml": yamlDocs(configMap("keep-1", undefined, {})) }),
    });
    const result = await applier.apply({ project: p, files: files({}) });
    expect(result.objects).toEqual([]);
    expect(api.store.has("configmaps", "default", "keep-1")).toBe(true);
    expect(inventoryOf("group/keep")).toEqual(["default_keep-1__ConfigMap"]);
  });

  test("waits for a Deployment to become ready", async () => {
    const p = project("group/deploy", { default_namespace: "default" });
    const waiting = new Promise<void>((resolve) => {
      const l = (e: ApplierEvent) => {
        if (e.type === "waiting" && e.pending.some((r) => r.name === "web")) {
          listeners.delete(l);
          resolve();
        }
      };
      listeners.add(l);
    });
    let done = false;
    const applying = applier
      .apply({
        project: p,
        files: files({
          "d.yaml": yamlDocs(deployment("web", "default"), configMap("web-config", undefined, {})),
        }),
      })
      .finally(() => {
        done = true;
      });
    await waiting;
    expect(done).toBe(false);
    api.setDeploymentReady("default", "web", 1); // one of two replicas: still waiting
    const waitingAgain = new Promise<void>((resolve) => {
      const l = (e: ApplierEvent) => {
        if (e.type === "waiting" && e.pending.some((r) => r.name === "web")) {
          listeners.delete(l);
          resolve();
        }
      };
      listeners.add(l);
    });
    await waitingAgain;
    expect(done).toBe(false);
    api.setDeploymentReady("default", "web", true);
    const result = await applying;
    expect(result.error).toBe("");
    expect(statuses(result)).toEqual({
      "Deployment/default/web": "applied",
      "ConfigMap/default/web-config": "applied",
    });
  });

  test("a Deployment not ready within reconcile_timeout is reported as failed, with why", async () => {
    const p = project("group/slow", { reconcile_timeout: 150 });
    const result = await applier.apply({
      project: p,
      files: files({
        "d.yaml": yamlDocs(deployment("slow", "default"), configMap("slow-config", undefined, {})),
      }),
    });
    expect(result.error).toMatch(/1 object\(s\) not ready within reconcile_timeout \(150 ms\)/);
    expect(result.objects).toEqual([
      expect.objectContaining({
        kind: "Deployment",
        name: "slow",
        status: "failed",
        error: expect.stringMatching(/not ready within reconcile_timeout.*generation 1 not observed/),
      }),
      expect.objectContaining({ kind: "ConfigMap", name: "slow-config", status: "applied", error: "" }),
    ]);
    expect(api.store.has("deployments", "default", "slow")).toBe(true);
  });
});
