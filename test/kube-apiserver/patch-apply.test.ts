// PATCH and server-side apply against the real kubectl: JSON merge patch, JSON patch, strategic
// merge patch (containers merged by name), `kubectl apply` (client-side, last-applied
// annotation), `kubectl apply --server-side` with field ownership, and the conflict between two
// managers (409 naming the other manager and the field) that `--force-conflicts` resolves.
import { request } from "node:https";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { stringify } from "yaml";
import { type Kubectl, kubectlFor } from "../support/kube/kubectl.ts";
import { type KubeApiServer, type KubeObject, startKubeApiServer } from "../support/kube-apiserver.ts";

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

async function ok(args: string[], input?: string): Promise<string> {
  const r = await kubectl.run(args, input === undefined ? {} : { input });
  expect(r.code, `kubectl ${args.join(" ")}: ${r.stderr}`).toBe(0);
  return r.stdout;
}

function deployment(
  name: string,
  replicas: number,
  containers: Record<string, unknown>[],
  labels: Record<string, string> = {},
) {
  return stringify({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: "default", labels: { app: name, ...labels } },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: { containers } },
    },
  });
}

const nginx = (image = "nginx:1.25") => ({ name: "nginx", image });
type Deployment = KubeObject & {
  spec: {
    replicas: number;
    template: { spec: { containers: { name: string; image: string; env?: unknown }[] } };
  };
};
const get = (name: string) => api.store.get("deployments", "default", name) as Deployment;
/** Manager -> the fields it owns, as `kubectl get --show-managed-fields` shows them. */
const owners = (o: KubeObject) =>
  Object.fromEntries(
    (o.metadata.managedFields ?? []).map((e) => [`${e.manager}/${e.operation}`, e.fieldsV1]),
  );

async function rawPatch(path: string, contentType: string, body: string) {
  return new Promise<{ status: number; body: Record<string, unknown> }>((resolve, reject) => {
    const req = request(`${api.url}${path}`, {
      method: "PATCH",
      ca: api.caCert,
      headers: { authorization: `Bearer ${api.token}`, "content-type": contentType },
      signal: AbortSignal.timeout(10_000),
    });
    req.on("response", (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (c: string) => {
        text += c;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe("PATCH and apply with kubectl", () => {
  test("apply --server-side: created, fields owned by kubectl, a repeat changes nothing, a dry run stores nothing", async () => {
    const manifest = deployment("ssa", 2, [nginx()]);
    expect(await ok(["apply", "--server-side", "-f", "-"], manifest)).toContain(
      "deployment.apps/ssa serverside-applied",
    );
    const created = get("ssa");
    expect(created.spec.replicas).toBe(2);
    expect(created.metadata.managedFields).toEqual([
      expect.objectContaining({
        manager: "kubectl",
        operation: "Apply",
        apiVersion: "apps/v1",
        fieldsType: "FieldsV1",
      }),
    ]);
    expect(owners(created)["kubectl/Apply"]).toMatchObject({
      "f:metadata": { "f:labels": { "f:app": {} } },
      "f:spec": {
        "f:replicas": {},
        "f:template": {
          "f:spec": { "f:containers": { 'k:{"name":"nginx"}': { ".": {}, "f:image": {}, "f:name": {} } } },
        },
      },
    });
    await ok(["apply", "--server-side", "-f", "-"], manifest);
    expect(get("ssa").metadata.resourceVersion).toBe(created.metadata.resourceVersion);

    const rv = api.store.resourceVersion;
    await ok(["apply", "--server-side", "--dry-run=server", "-f", "-"], deployment("ssa", 7, [nginx()]));
    expect(get("ssa").spec.replicas).toBe(2);
    expect(api.store.resourceVersion).toBe(rv);
  });

  test("a second manager changing an owned field: 409 naming kubectl and .spec.replicas; --force-conflicts takes it over", async () => {
    await ok(["apply", "--server-side", "-f", "-"], deployment("fight", 2, [nginx()]));
    const theirs = deployment("fight", 3, [nginx()]);
    const refused = await kubectl.run(["apply", "--server-side", "--field-manager=other", "-f", "-"], {
      input: theirs,
    });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas');
    expect(get("fight").spec.replicas).toBe(2);

    // On the wire: a Status with reason Conflict and the field as a cause.
    const wire = await rawPatch(
      "/apis/apps/v1/namespaces/default/deployments/fight?fieldManager=other",
      "application/apply-patch+yaml",
      theirs,
    );
    expect(wire.status).toBe(409);
    expect(wire.body).toMatchObject({
      kind: "Status",
      reason: "Conflict",
      code: 409,
      details: {
        causes: [
          { type: "FieldManagerConflict", message: 'conflict with "kubectl"', field: ".spec.replicas" },
        ],
      },
    });

    // Same value: no conflict, shared ownership.
    await ok(
      ["apply", "--server-side", "--field-manager=sharer", "-f", "-"],
      deployment("fight", 2, [nginx()]),
    );

    expect(
      await ok(["apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "-"], theirs),
    ).toContain("serverside-applied");
    const forced = get("fight");
    expect(forced.spec.replicas).toBe(3);
    expect(owners(forced)["other/Apply"]).toMatchObject({ "f:spec": { "f:replicas": {} } });
    expect(owners(forced)["kubectl/Apply"]).not.toHaveProperty(["f:spec", "f:replicas"]);
    expect(owners(forced)["sharer/Apply"]).not.toHaveProperty(["f:spec", "f:replicas"]);
    // Now kubectl is the one refused, naming "other".
    const back = await kubectl.run(["apply", "--server-side", "-f", "-"], {
      input: deployment("fight", 2, [nginx()]),
    });
    expect(back.stderr).toContain('Apply failed with 1 conflict: conflict with "other": .spec.replicas');
    // And a plain write's manager is named with its API version.
    expect(await ok(["scale", "deployment", "fight", "--replicas=5"])).toContain(
      "deployment.apps/fight scaled",
    );
    expect(get("fight").spec.replicas).toBe(5);
    // No --field-manager from kubectl scale: the server names the manager after the User-Agent.
    expect(get("fight").metadata.managedFields).toContainEqual(
      expect.objectContaining({
        manager: "kubectl",
        operation: "Update",
        subresource: "scale",
        fieldsV1: { "f:spec": { "f:replicas": {} } },
      }),
    );
    await ok([
      "patch",
      "deployment",
      "fight",
      "--type=merge",
      "-p",
      '{"spec":{"replicas":6}}',
      "--field-manager=patcher",
    ]);
    const afterPatch = await kubectl.run(["apply", "--server-side", "--field-manager=other", "-f", "-"], {
      input: theirs,
    });
    expect(afterPatch.stderr).toContain('conflict with "patcher" using apps/v1: .spec.replicas');
  });

  test("apply --server-side drops what a manager no longer applies, unless another manager owns it too", async () => {
    await ok(
      ["apply", "--server-side", "-f", "-"],
      deployment("drop", 1, [nginx(), { name: "side", image: "busybox" }], { a: "1", b: "2" }),
    );
    await ok(
      ["apply", "--server-side", "--field-manager=keeper", "-f", "-"],
      stringify({
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "drop", namespace: "default", labels: { b: "2" } },
      }),
    );
    await ok(["apply", "--server-side", "-f", "-"], deployment("drop", 1, [nginx()]));
    const after = get("drop");
    expect(after.metadata.labels).toEqual({ app: "drop", b: "2" });
    expect(after.spec.template.spec.containers.map((c) => c.name)).toEqual(["nginx"]);
  });

  test("kubectl apply (client-side): the last-applied annotation, strategic merge by container name, removals", async () => {
    expect(await ok(["apply", "-f", "-"], deployment("csa", 2, [nginx()]))).toContain(
      "deployment.apps/csa created",
    );
    const created = get("csa");
    const lastApplied = JSON.parse(
      created.metadata.annotations?.["kubectl.kubernetes.io/last-applied-configuration"] ?? "{}",
    );
    expect(lastApplied).toMatchObject({ kind: "Deployment", spec: { replicas: 2 } });
    expect(created.metadata.managedFields?.[0]).toMatchObject({
      manager: "kubectl-client-side-apply",
      operation: "Update",
    });

    // Someone else adds an env var to nginx; the next apply must merge, not replace, nginx.
    expect(await ok(["set", "env", "deployment/csa", "-c", "nginx", "FROM_ELSEWHERE=1"])).toContain(
      "env updated",
    );
    const sidecar = { name: "sidecar", image: "busybox" };
    expect(
      await ok(["apply", "-f", "-"], deployment("csa", 4, [sidecar, nginx("nginx:1.26")], { tier: "x" })),
    ).toContain("deployment.apps/csa configured");
    let now = get("csa");
    expect(now.spec.replicas).toBe(4);
    expect(now.metadata.labels).toEqual({ app: "csa", tier: "x" });
    expect(now.spec.template.spec.containers).toEqual([
      sidecar,
      { name: "nginx", image: "nginx:1.26", env: [{ name: "FROM_ELSEWHERE", value: "1" }] },
    ]);
    expect(now.metadata.generation).toBe(3);

    // Removed from the manifest: removed from the object (the last-applied annotation says what kubectl set).
    await ok(["apply", "-f", "-"], deployment("csa", 4, [nginx("nginx:1.26")]));
    now = get("csa");
    expect(now.metadata.labels).toEqual({ app: "csa" });
    expect(now.spec.template.spec.containers.map((c) => c.name)).toEqual(["nginx"]);
    expect(now.spec.template.spec.containers[0]!.env).toEqual([{ name: "FROM_ELSEWHERE", value: "1" }]);
  });

  test("kubectl patch: strategic (default), merge, json; label and annotate; a custom resource refuses strategic", async () => {
    await ok(
      ["apply", "--server-side", "-f", "-"],
      deployment("patched", 1, [nginx(), { name: "log", image: "fluent" }]),
    );
    await ok([
      "patch",
      "deployment",
      "patched",
      "-p",
      '{"spec":{"template":{"spec":{"containers":[{"name":"log","image":"fluent:2"}]}}}}',
    ]);
    expect(get("patched").spec.template.spec.containers).toEqual([
      nginx(),
      { name: "log", image: "fluent:2" },
    ]);
    await ok([
      "patch",
      "deployment",
      "patched",
      "--type=merge",
      "-p",
      '{"spec":{"template":{"spec":{"containers":[{"name":"only","image":"x"}]}}}}',
    ]);
    expect(get("patched").spec.template.spec.containers).toEqual([{ name: "only", image: "x" }]);
    await ok([
      "patch",
      "deployment",
      "patched",
      "--type=json",
      "-p",
      '[{"op":"replace","path":"/spec/replicas","value":9},{"op":"add","path":"/metadata/labels/j","value":"p"}]',
    ]);
    expect(get("patched").spec.replicas).toBe(9);
    const badTest = await kubectl.run([
      "patch",
      "deployment",
      "patched",
      "--type=json",
      "-p",
      '[{"op":"test","path":"/spec/replicas","value":1}]',
    ]);
    expect(badTest.code).toBe(1);
    await ok(["label", "deployment", "patched", "team=a"]);
    await ok(["annotate", "deployment", "patched", "note=hello"]);
    await ok(["label", "deployment", "patched", "j-"]);
    const labelled = get("patched");
    expect(labelled.metadata.labels).toEqual({ app: "patched", team: "a" });
    expect(labelled.metadata.annotations).toEqual({ note: "hello" });

    await ok(
      ["create", "-f", "-"],
      stringify({
        apiVersion: "apiextensions.k8s.io/v1",
        kind: "CustomResourceDefinition",
        metadata: { name: "widgets.example.com" },
        spec: {
          group: "example.com",
          scope: "Namespaced",
          names: { plural: "widgets", singular: "widget", kind: "Widget" },
          versions: [
            { name: "v1", served: true, storage: true, schema: { openAPIV3Schema: { type: "object" } } },
          ],
        },
      }),
    );
    const widget = (size: number, tags: string[]) =>
      stringify({
        apiVersion: "example.com/v1",
        kind: "Widget",
        metadata: { name: "w", namespace: "default" },
        spec: { size, tags },
      });
    await ok(["apply", "-f", "-"], widget(1, ["a", "b"]));
    await ok(["apply", "-f", "-"], widget(2, ["c"]));
    expect(api.store.get("widgets.example.com", "default", "w").spec).toEqual({ size: 2, tags: ["c"] });
    const strategic = await kubectl.run(["patch", "widget", "w", "-p", '{"spec":{"size":3}}']);
    expect(strategic.code).toBe(1);
    // kubectl names the refusal the server gave.
    expect(strategic.stderr).toContain(
      "application/strategic-merge-patch+json is not supported by example.com/v1, Kind=Widget: the body of the request was in an unknown format",
    );
    await ok(["patch", "widget", "w", "--type=merge", "-p", '{"spec":{"size":3}}']);
    await ok(
      ["apply", "--server-side", "--field-manager=ops", "--force-conflicts", "-f", "-"],
      widget(4, ["d"]),
    );
    expect(api.store.get("widgets.example.com", "default", "w").spec).toEqual({ size: 4, tags: ["d"] });
  });

  test("apply without a fieldManager is refused; an unknown patch type is 415", async () => {
    const noManager = await rawPatch(
      "/api/v1/namespaces/default/configmaps/x",
      "application/apply-patch+yaml",
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    );
    expect(noManager.status).toBe(400);
    expect(String(noManager.body.message)).toContain("fieldManager");
    const unknown = await rawPatch("/api/v1/namespaces/default/configmaps/x", "text/plain", "{}");
    expect(unknown.status).toBe(415);
    // Applying creates: 201.
    const created = await rawPatch(
      "/api/v1/namespaces/default/configmaps/x?fieldManager=raw",
      "application/apply-patch+yaml",
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {k: v}\n",
    );
    expect(created.status).toBe(201);
    expect(api.store.get("configmaps", "default", "x").data).toEqual({ k: "v" });
  });
});
