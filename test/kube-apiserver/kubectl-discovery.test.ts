// The Kubernetes API test server against the real kubectl (v1.32): discovery, tables, create,
// get, delete, CustomResourceDefinitions. If kubectl rejects the server, the server is wrong.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { parse as parseYaml } from "yaml";
import { type Kubectl, kubectlFor } from "../support/kube/kubectl.ts";
import { type KubeApiServer, startKubeApiServer } from "../support/kube-apiserver.ts";

let api: KubeApiServer;
let kubectl: Kubectl;
beforeAll(async () => {
  api = await startKubeApiServer();
  kubectl = await kubectlFor(api);
});
afterAll(async () => {
  await kubectl?.close();
  await api?.close();
});

/** Runs kubectl and expects it to succeed; its stdout. */
async function ok(args: string[], input?: string): Promise<string> {
  const r = await kubectl.run(args, input === undefined ? {} : { input });
  expect(r.stderr, `kubectl ${args.join(" ")}`).not.toMatch(/error/i);
  expect(r.code, `kubectl ${args.join(" ")}: ${r.stderr}`).toBe(0);
  return r.stdout;
}

/** `kubectl get` table output: header cells and rows of cells. */
function table(stdout: string) {
  const [header, ...rows] = stdout.trim().split("\n");
  return { header: header!.split(/\s{2,}/), rows: rows.map((r) => r.split(/\s{2,}/)) };
}

const DEPLOYMENT = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
  labels: {app: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: nginx, image: "nginx:1.25"}
`;

describe("kubectl against the Kubernetes API test server", () => {
  test("api-resources: every served kind with its group version and scope", async () => {
    const namespaced = (await ok(["api-resources", "--namespaced=true", "-o", "name"])).trim().split("\n");
    const cluster = (await ok(["api-resources", "--namespaced=false", "-o", "name"])).trim().split("\n");
    expect(namespaced.sort()).toEqual(
      [
        "configmaps",
        "events",
        "pods",
        "secrets",
        "serviceaccounts",
        "services",
        "daemonsets.apps",
        "deployments.apps",
        "replicasets.apps",
        "statefulsets.apps",
        "leases.coordination.k8s.io",
        "ingresses.networking.k8s.io",
        "networkpolicies.networking.k8s.io",
        "poddisruptionbudgets.policy",
        "rolebindings.rbac.authorization.k8s.io",
        "roles.rbac.authorization.k8s.io",
      ].sort(),
    );
    expect(cluster.sort()).toEqual(
      [
        "namespaces",
        "nodes",
        "customresourcedefinitions.apiextensions.k8s.io",
        "clusterrolebindings.rbac.authorization.k8s.io",
        "clusterroles.rbac.authorization.k8s.io",
      ].sort(),
    );
    const wide = table(await ok(["api-resources"]));
    expect(wide.header).toEqual(["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]);
    expect(wide.rows).toContainEqual(["deployments", "deploy", "apps/v1", "true", "Deployment"]);
    expect(wide.rows).toContainEqual([
      "clusterroles",
      "rbac.authorization.k8s.io/v1",
      "false",
      "ClusterRole",
    ]);
  });

  test("kubectl asks for aggregated discovery and gets it; /version answers", async () => {
    const before = api.requests.length;
    // A fresh cache: discovery is fetched again.
    const fresh = await kubectlFor(api);
    try {
      const r = await fresh.run(["version", "-o", "json"]);
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout).serverVersion).toMatchObject({ major: "1", minor: "32" });
      await fresh.run(["get", "ns"]);
    } finally {
      await fresh.close();
    }
    const seen = api.requests.slice(before).map((r) => r.path.split("?")[0]);
    expect(seen).toEqual(expect.arrayContaining(["/version", "/api", "/apis"]));
    // Aggregated: no per-group-version fetches needed.
    expect(seen.filter((p) => /^\/apis\/[^/]+\/[^/]+$/.test(p ?? ""))).toEqual([]);
  });

  test("get: server-side tables for namespaces, pods across namespaces, a single object", async () => {
    const ns = table(await ok(["get", "namespaces"]));
    expect(ns.header).toEqual(["NAME", "STATUS", "AGE"]);
    expect(ns.rows.map((r) => r.slice(0, 2))).toEqual([
      ["default", "Active"],
      ["kube-system", "Active"],
    ]);
    api.store.create("namespaces", undefined, { metadata: { name: "tables" } });
    api.store.create("pods", "tables", { metadata: { name: "p1" }, spec: { containers: [{ name: "c" }] } });
    api.store.create("pods", "default", {
      metadata: { name: "p2" },
      spec: { containers: [{ name: "c" }] },
      status: { phase: "Running", containerStatuses: [{ ready: true, restartCount: 3 }] },
    });
    const pods = table(await ok(["get", "pods", "--all-namespaces"]));
    expect(pods.header).toEqual(["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    expect(pods.rows.map((r) => r.slice(0, 5))).toEqual([
      ["default", "p2", "1/1", "Running", "3"],
      ["tables", "p1", "0/1", "Pending", "0"],
    ]);
    const one = table(await ok(["get", "pod", "p1", "-n", "tables"]));
    expect(one.rows.map((r) => r[0])).toEqual(["p1"]);
    const none = await kubectl.run(["get", "pods", "-n", "kube-system"]);
    expect(none.stderr).toContain("No resources found in kube-system namespace.");
  });

  test("create -f, get -o yaml, create again (AlreadyExists), delete, get (NotFound)", async () => {
    expect(await ok(["create", "-f", "-"], DEPLOYMENT)).toContain("deployment.apps/web created");
    const stored = api.store.get("deployments", "default", "web");
    expect(stored.spec).toMatchObject({ replicas: 2 });

    const yaml = parseYaml(await ok(["get", "deployment", "web", "-o", "yaml"]));
    expect(yaml).toMatchObject({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "web", namespace: "default", uid: stored.metadata.uid, generation: 1 },
      spec: { template: { spec: { containers: [{ name: "nginx", image: "nginx:1.25" }] } } },
    });
    expect(yaml.metadata.creationTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(Number(yaml.metadata.resourceVersion)).toBeGreaterThan(0);

    const deploys = table(await ok(["get", "deploy"]));
    expect(deploys.header).toEqual(["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
    expect(deploys.rows.map((r) => r.slice(0, 4))).toEqual([["web", "0/2", "0", "0"]]);

    const again = await kubectl.run(["create", "-f", "-"], { input: DEPLOYMENT });
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(
      'Error from server (AlreadyExists): error when creating "STDIN": deployments.apps "web" already exists',
    );

    expect(await ok(["delete", "deployment", "web"])).toContain('deployment.apps "web" deleted');
    expect(api.store.has("deployments", "default", "web")).toBe(false);
    const gone = await kubectl.run(["get", "deployment", "web"]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain('Error from server (NotFound): deployments.apps "web" not found');
  });

  test("kubectl create namespace|configmap|secret|serviceaccount: bodies in Kubernetes protobuf", async () => {
    expect(await ok(["create", "namespace", "team-a"])).toBe("namespace/team-a created\n");
    await ok(["create", "configmap", "cfg", "-n", "team-a", "--from-literal=a=b", "--from-literal=c=d"]);
    await ok(["create", "secret", "generic", "pw", "-n", "team-a", "--from-literal=password=hunter2"]);
    await ok(["create", "serviceaccount", "robot", "-n", "team-a"]);
    const sent = api.requests.filter((r) => r.method === "POST").map((r) => r.headers["content-type"]);
    expect(sent).toContain("application/vnd.kubernetes.protobuf");
    expect(api.store.get("namespaces", undefined, "team-a").status).toEqual({ phase: "Active" });
    expect(api.store.get("configmaps", "team-a", "cfg").data).toEqual({ a: "b", c: "d" });
    const secret = api.store.get("secrets", "team-a", "pw");
    expect(secret).toMatchObject({
      type: "Opaque",
      data: { password: Buffer.from("hunter2").toString("base64") },
    });
    expect(api.store.has("serviceaccounts", "team-a", "robot")).toBe(true);
    // A kind whose protobuf the server does not decode: a clear refusal.
    const deployment = await kubectl.run(["create", "deployment", "d", "--image=nginx", "-n", "team-a"]);
    expect(deployment.code).toBe(1);
    expect(deployment.stderr).toContain(
      "decodes protobuf only for v1 Namespace, ConfigMap, Secret, ServiceAccount",
    );
  });

  test("cluster-scoped and RBAC kinds: create, get, delete", async () => {
    const rbac = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader}
rules: [{apiGroups: [""], resources: [pods], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: read, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: reader}
subjects: [{kind: ServiceAccount, name: default, namespace: default}]
`;
    const out = await ok(["create", "-f", "-"], rbac);
    expect(out).toContain("clusterrole.rbac.authorization.k8s.io/reader created");
    expect(out).toContain("rolebinding.rbac.authorization.k8s.io/read created");
    expect(api.store.get("clusterroles", undefined, "reader").metadata.namespace).toBeUndefined();
    expect(table(await ok(["get", "clusterroles"])).rows.map((r) => r[0])).toEqual(["reader"]);
    expect(await ok(["delete", "-f", "-"], rbac)).toContain(
      'clusterrole.rbac.authorization.k8s.io "reader" deleted',
    );
    expect(api.store.list("rolebindings", undefined)).toEqual([]);
  });

  test("a CustomResourceDefinition: its kind appears in discovery and its objects are served, then go with it", async () => {
    const crd = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Cluster
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - {name: v1alpha1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
`;
    await ok(["create", "-f", "-"], crd);
    const resources = table(await ok(["api-resources", "--api-group=example.com"]));
    expect(resources.rows).toEqual([
      ["gadgets", "example.com/v1alpha1", "false", "Gadget"],
      ["widgets", "wd", "example.com/v1", "true", "Widget"],
    ]);
    const objects = `
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, namespace: default}
spec: {size: 3}
---
apiVersion: example.com/v1alpha1
kind: Gadget
metadata: {name: g1}
spec: {shiny: true}
`;
    const created = await ok(["create", "-f", "-"], objects);
    expect(created).toContain("widget.example.com/w1 created");
    expect(created).toContain("gadget.example.com/g1 created");
    expect(table(await ok(["get", "wd"])).rows.map((r) => r[0])).toEqual(["w1"]);
    expect(JSON.parse(await ok(["get", "gadget", "g1", "-o", "json"]))).toMatchObject({
      apiVersion: "example.com/v1alpha1",
      kind: "Gadget",
      metadata: { name: "g1" },
      spec: { shiny: true },
    });
    expect(table(await ok(["get", "crd"])).header).toEqual(["NAME", "CREATED AT"]);

    await ok(["delete", "crd", "widgets.example.com"]);
    expect(api.store.registry.all().some((t) => t.kind === "Widget")).toBe(false);
    // With discovery cached, the list itself is refused; with a fresh cache, discovery knows.
    const gone = await kubectl.run(["get", "widgets"]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain("Error from server (NotFound)");
    const fresh = await kubectlFor(api);
    try {
      const unknown = await fresh.run(["get", "widgets"]);
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toContain('the server doesn\'t have a resource type "widgets"');
      expect((await fresh.run(["get", "gadgets", "-o", "name"])).stdout).toBe("gadget.example.com/g1\n");
    } finally {
      await fresh.close();
    }
  });
});
