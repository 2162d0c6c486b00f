// Server semantics the GitOps tests rely on: one resourceVersion counter, uid, timestamps,
// generation, list + watch from a version (bookmarks, 410 Expired), label and field selectors,
// delete propagation, dry runs. Checked with the real kubectl where it can say it, and on the wire
// where only a controller would look (bookmarks, expired versions).
import { once } from "node:events";
import type { IncomingMessage } from "node:http";
import { request } from "node:https";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type Kubectl, kubectlFor } from "../support/kube/kubectl.ts";
import { type KubeApiServer, type KubeObject, startKubeApiServer } from "../support/kube-apiserver.ts";
import { within } from "../support/until.ts";

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

const pod = (name: string, ns: string, labels: Record<string, string> = {}, phase?: string) => ({
  metadata: { name, namespace: ns, labels },
  spec: { containers: [{ name: "c", image: "busybox" }] },
  ...(phase && { status: { phase } }),
});

/** A raw HTTP request to the server with its token; the response and a line reader over the body. */
async function open(server: KubeApiServer, path: string, init: { method?: string; body?: unknown } = {}) {
  const req = request(`${server.url}${path}`, {
    method: init.method ?? "GET",
    ca: server.caCert,
    headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
  });
  req.end(init.body === undefined ? undefined : JSON.stringify(init.body));
  const [res] = (await once(req, "response", { signal: AbortSignal.timeout(10_000) })) as [IncomingMessage];
  res.setEncoding("utf8");
  res.on("error", () => {}); // closed by the test
  const lines: string[] = [];
  let partial = "";
  let wake = () => {};
  res.on("data", (chunk: string) => {
    const parts = (partial + chunk).split("\n");
    partial = parts.pop() ?? "";
    lines.push(...parts);
    wake();
  });
  const ended = once(res, "end").then(
    () => undefined,
    () => undefined,
  );
  return {
    res,
    /** The next `count` events (JSON lines) of a watch, within a deadline. */
    async events(count: number): Promise<{ type: string; object: KubeObject & Record<string, unknown> }[]> {
      await within(
        new Promise<void>((resolve) => {
          wake = () => lines.length >= count && resolve();
          wake();
        }),
        10_000,
        `${count} watch events; got ${JSON.stringify(lines)}`,
      );
      return lines.splice(0, count).map((l) => JSON.parse(l));
    },
    async body(): Promise<unknown> {
      await within(ended, 10_000, "the response to end");
      return JSON.parse(lines.join("\n") + partial);
    },
    close: () => req.destroy(),
  };
}

describe("Kubernetes API test server semantics", () => {
  test("one resourceVersion counter over every kind; uid, creationTimestamp, generation", async () => {
    const rv0 = api.store.resourceVersion;
    const cm = api.store.create("configmaps", "default", { metadata: { name: "rv-cm" }, data: { a: "1" } });
    const dep = api.store.create("deployments", "default", {
      metadata: { name: "rv-dep" },
      spec: { replicas: 1, template: { spec: { containers: [{ name: "c", image: "a" }] } } },
    });
    expect([cm.metadata.resourceVersion, dep.metadata.resourceVersion]).toEqual([
      String(rv0 + 1),
      String(rv0 + 2),
    ]);
    expect(cm.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(cm.metadata.uid).not.toBe(dep.metadata.uid);
    expect(dep.metadata.generation).toBe(1);

    // A spec change is a new generation; labels and status (through the status subresource) are not.
    const read = JSON.parse(await ok(["get", "deploy", "rv-dep", "-o", "json"]));
    read.spec.replicas = 3;
    await ok(["replace", "-f", "-"], JSON.stringify(read));
    expect(api.store.get("deployments", "default", "rv-dep").metadata.generation).toBe(2);
    api.setDeploymentReady("default", "rv-dep", true);
    const after = api.store.get("deployments", "default", "rv-dep");
    expect(after.metadata.generation).toBe(2);
    expect(after.metadata.uid).toBe(dep.metadata.uid);
    expect(after.metadata.creationTimestamp).toBe(dep.metadata.creationTimestamp);
    expect(Number(after.metadata.resourceVersion)).toBe(api.store.resourceVersion);

    // A stale resourceVersion on PUT is a conflict.
    const stale = await kubectl.run(["replace", "-f", "-"], { input: JSON.stringify(read) });
    expect(stale.code).toBe(1);
    expect(stale.stderr).toContain("the object has been modified");
  });

  test("kubectl get -w: the state, then each change, as they happen; a label selector narrows it", async () => {
    api.store.create("namespaces", undefined, { metadata: { name: "watched" } });
    api.store.create("pods", "watched", pod("before", "watched", { app: "w" }));
    const all = kubectl.start(["get", "pods", "-n", "watched", "-w", "--output-watch-events"]);
    const some = kubectl.start([
      "get",
      "pods",
      "-n",
      "watched",
      "-w",
      "--output-watch-events",
      "-l",
      "app=w",
    ]);
    try {
      await all.line(/^ADDED\s+before\s/);
      await some.line(/^ADDED\s+before\s/);
      await ok(
        ["create", "-f", "-"],
        JSON.stringify({ apiVersion: "v1", kind: "Pod", ...pod("other", "watched") }),
      );
      await all.line(/^ADDED\s+other\s+0\/1\s+Pending/);
      api.store.update("pods", "watched", "before", { status: { phase: "Running" } });
      await all.line(/^MODIFIED\s+before\s+0\/1\s+Running/);
      await ok(["delete", "pod", "before", "-n", "watched"]);
      await all.line(/^DELETED\s+before\s/);
      await some.line(/^DELETED\s+before\s/);
      expect(all.lines[0]).toMatch(/^EVENT\s+NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE$/);
      expect(some.lines.filter((l) => l.includes("other"))).toEqual([]);
    } finally {
      await all.stop();
      await some.stop();
    }
  });

  test("watch from a list's version: later changes only; BOOKMARKs when allowed; out of the selection is DELETED", async () => {
    api.store.create("namespaces", undefined, { metadata: { name: "wire" } });
    const list = (await (await open(api, "/api/v1/namespaces/wire/configmaps")).body()) as {
      metadata: { resourceVersion: string };
    };
    const watch = await open(
      api,
      `/api/v1/namespaces/wire/configmaps?watch=true&allowWatchBookmarks=true&labelSelector=keep%3Dyes&resourceVersion=${list.metadata.resourceVersion}`,
    );
    try {
      expect(watch.res.statusCode).toBe(200);
      api.store.create("configmaps", "wire", { metadata: { name: "a", labels: { keep: "yes" } } });
      api.store.create("configmaps", "wire", { metadata: { name: "b", labels: { keep: "no" } } });
      const [added] = await watch.events(1);
      expect(added).toMatchObject({ type: "ADDED", object: { metadata: { name: "a" } } });
      api.sendBookmarks();
      const [bookmark] = await watch.events(1);
      expect(bookmark).toEqual({
        type: "BOOKMARK",
        object: {
          kind: "ConfigMap",
          apiVersion: "v1",
          metadata: { resourceVersion: String(api.store.resourceVersion) },
        },
      });
      api.store.update("configmaps", "wire", "a", {
        metadata: { ...api.store.get("configmaps", "wire", "a").metadata, labels: { keep: "no" } },
      });
      const [left] = await watch.events(1);
      expect(left).toMatchObject({
        type: "DELETED",
        object: { metadata: { name: "a", labels: { keep: "no" } } },
      });
    } finally {
      watch.close();
    }
  });

  test("a version older than the history kept: the watch ends with an ERROR event, a 410 Expired Status", async () => {
    const small = await startKubeApiServer({ historyLimit: 3 });
    try {
      const old = small.store.resourceVersion;
      for (let i = 0; i < 5; i++)
        small.store.create("configmaps", "default", { metadata: { name: `c${i}` } });
      const watch = await open(small, `/api/v1/configmaps?watch=true&resourceVersion=${old}`);
      expect(watch.res.statusCode).toBe(200);
      const [error] = await watch.events(1);
      expect(error).toMatchObject({
        type: "ERROR",
        object: { kind: "Status", status: "Failure", reason: "Expired", code: 410 },
      });
      expect(String(error!.object.message)).toMatch(/^too old resource version: \d+ \(\d+\)$/);
      await watch.body().catch(() => undefined); // and it ends
      // A recent version still replays what happened since.
      const recent = await open(
        small,
        `/api/v1/configmaps?watch=true&resourceVersion=${small.store.resourceVersion - 1}`,
      );
      expect((await recent.events(1))[0]).toMatchObject({
        type: "ADDED",
        object: { metadata: { name: "c4" } },
      });
      recent.close();
      // A list at an exact version the history no longer holds: 410 Gone.
      const exact = await open(small, `/api/v1/configmaps?resourceVersion=${old}&resourceVersionMatch=Exact`);
      expect(exact.res.statusCode).toBe(410);
      expect(await exact.body()).toMatchObject({ kind: "Status", reason: "Expired", code: 410 });
    } finally {
      await small.close();
    }
  });

  test("label and field selectors (metadata.name, metadata.namespace, status.phase) with kubectl", async () => {
    api.store.create("namespaces", undefined, { metadata: { name: "sel" } });
    api.store.create("pods", "sel", pod("web-1", "sel", { tier: "web", track: "stable" }, "Running"));
    api.store.create("pods", "sel", pod("web-2", "sel", { tier: "web" }, "Pending"));
    api.store.create("pods", "sel", pod("db-1", "sel", { tier: "db" }, "Running"));
    api.store.create("pods", "default", pod("web-3", "default", { tier: "web" }, "Running"));
    const names = async (...args: string[]) =>
      (await ok(["get", "pods", "-o", "name", ...args])).trim().split("\n").filter(Boolean).sort();
    expect(await names("-n", "sel", "--field-selector", "status.phase=Running")).toEqual([
      "pod/db-1",
      "pod/web-1",
    ]);
    expect(
      await names("-A", "-l", "tier", "--field-selector", "status.phase=Running,metadata.namespace!=sel"),
    ).toEqual(["pod/web-3"]);
    expect(await names("-n", "sel", "--field-selector", "metadata.name=web-2")).toEqual(["pod/web-2"]);
    expect(await names("-n", "sel", "-l", "tier in (web,db),track")).toEqual(["pod/web-1"]);
    expect(await names("-n", "sel", "-l", "tier!=web")).toEqual(["pod/db-1"]);
    expect(await names("-n", "sel", "-l", "tier=web,!track")).toEqual(["pod/web-2"]);
    expect(await names("-n", "sel", "-l", "tier notin (web)")).toEqual(["pod/db-1"]);
    const bad = await kubectl.run(["get", "pods", "-n", "sel", "-l", "tier in web"]);
    expect(bad.code).toBe(1);
  });

  test("delete propagation: Background and Foreground take the dependents, Orphan releases them", async () => {
    const chain = (prefix: string) => {
      const d = api.store.create("deployments", "default", { metadata: { name: `${prefix}-d` }, spec: {} });
      const owner = (o: KubeObject) => [
        {
          apiVersion: o.apiVersion,
          kind: o.kind,
          name: o.metadata.name,
          uid: o.metadata.uid!,
          controller: true,
        },
      ];
      const rs = api.store.create("replicasets", "default", {
        metadata: { name: `${prefix}-rs`, ownerReferences: owner(d) },
      });
      api.store.create("pods", "default", {
        metadata: { name: `${prefix}-pod`, ownerReferences: owner(rs) },
      });
    };
    chain("bg");
    chain("fg");
    chain("or");
    await ok(["delete", "deployment", "bg-d"]); // kubectl's default: background
    expect(api.store.has("replicasets", "default", "bg-rs")).toBe(false);
    expect(api.store.has("pods", "default", "bg-pod")).toBe(false);
    await ok(["delete", "deployment", "fg-d", "--cascade=foreground"]);
    expect(api.store.has("replicasets", "default", "fg-rs")).toBe(false);
    expect(api.store.has("pods", "default", "fg-pod")).toBe(false);
    await ok(["delete", "deployment", "or-d", "--cascade=orphan"]);
    expect(api.store.has("deployments", "default", "or-d")).toBe(false);
    const orphan = api.store.get("replicasets", "default", "or-rs");
    expect(orphan.metadata.ownerReferences).toBeUndefined();
    expect(api.store.has("pods", "default", "or-pod")).toBe(true);

    // A namespace takes what is in it.
    api.store.create("namespaces", undefined, { metadata: { name: "doomed" } });
    api.store.create("configmaps", "doomed", { metadata: { name: "inside" } });
    await ok(["delete", "namespace", "doomed"]);
    expect(api.store.list("configmaps", "doomed")).toEqual([]);
  });

  test("dry runs: nothing stored, no new version", async () => {
    const cm = JSON.stringify({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "dry", namespace: "default" },
    });
    const rv = api.store.resourceVersion;
    expect(await ok(["create", "--dry-run=server", "-f", "-"], cm)).toContain(
      "configmap/dry created (server dry run)",
    );
    expect(api.store.has("configmaps", "default", "dry")).toBe(false);
    api.store.create("configmaps", "default", { metadata: { name: "dry" } });
    const after = api.store.resourceVersion;
    expect(after).toBe(rv + 1);
    expect(await ok(["delete", "--dry-run=server", "configmap", "dry"])).toContain("(server dry run)");
    expect(api.store.has("configmaps", "default", "dry")).toBe(true);
    const replaced = JSON.parse(await ok(["get", "configmap", "dry", "-o", "json"]));
    replaced.data = { changed: "yes" };
    await ok(["replace", "--dry-run=server", "-f", "-"], JSON.stringify(replaced));
    expect(api.store.get("configmaps", "default", "dry").data).toBeUndefined();
    expect(api.store.resourceVersion).toBe(after);
  });
});
