// The Kubernetes test server, checked against the real @kubernetes/client-node: tests that use it
// as a stand-in for kube-apiserver can trust what it says.
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ApiException, CoreV1Api, KubeConfig, Watch } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type KubeApiServer, startKubeApiServer } from "../support/kube-apiserver.ts";
import { kubeClient, rawKubeRequest, rawUpgrade } from "./support/kube-client.ts";

let api: KubeApiServer;
let dir: string;
beforeAll(async () => {
  api = await startKubeApiServer();
  dir = await mkdtemp(join(tmpdir(), "kube-apiserver-"));
});
afterAll(async () => {
  await api.close();
  await rm(dir, { recursive: true, force: true });
});

/** Collects watch events until `count` have arrived. */
function collect(count: number) {
  const events: { type: string; name: string }[] = [];
  let done!: () => void;
  const enough = new Promise<void>((resolve) => {
    done = resolve;
  });
  return {
    events,
    enough: () =>
      Promise.race([
        enough,
        new Promise((_, reject) =>
          setTimeout(() => reject(new Error(`only ${JSON.stringify(events)}`)), 10_000).unref(),
        ),
      ]),
    callback: (type: string, object: { metadata: { name: string } }) => {
      events.push({ type, name: object.metadata.name });
      if (events.length >= count) done();
    },
  };
}

describe("Kubernetes API test server", () => {
  test("no or wrong bearer token: 401 with a Status object", async () => {
    for (const headers of [{}, { authorization: "Bearer nope" }] as Record<string, string>[]) {
      const res = await rawKubeRequest(api, "/api/v1/namespaces", { headers });
      expect(res.status).toBe(401);
      expect(JSON.parse(res.body)).toMatchObject({ kind: "Status", status: "Failure", code: 401 });
    }
  });

  test("discovery: /api and /api/v1", async () => {
    const auth = { authorization: `Bearer ${api.token}` };
    expect(JSON.parse((await rawKubeRequest(api, "/api", { headers: auth })).body)).toMatchObject({
      kind: "APIVersions",
      versions: ["v1"],
    });
    const v1 = JSON.parse((await rawKubeRequest(api, "/api/v1", { headers: auth })).body);
    expect(v1.resources.map((r: { name: string }) => r.name)).toEqual(
      expect.arrayContaining(["namespaces", "configmaps", "pods", "pods/log"]),
    );
  });

  test("the real client from a written kubeconfig: list, create, get, delete, errors as Status", async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(await api.writeKubeconfig(join(dir, "kubeconfig")));
    const core = kc.makeApiClient(CoreV1Api);
    const before = await core.listNamespace();
    expect(before.items.map((n) => n.metadata?.name)).toEqual(
      expect.arrayContaining(["default", "kube-system"]),
    );
    await core.createNamespace({ body: { metadata: { name: "crud" } } });
    await core.createNamespacedConfigMap({
      namespace: "crud",
      body: { metadata: { name: "cm" }, data: { k: "v" } },
    });
    expect((await core.readNamespacedConfigMap({ namespace: "crud", name: "cm" })).data).toEqual({ k: "v" });
    const conflict = await core.createNamespace({ body: { metadata: { name: "crud" } } }).catch((e) => e);
    expect(conflict).toBeInstanceOf(ApiException);
    expect((conflict as ApiException<string>).code).toBe(409);
    expect(JSON.parse((conflict as ApiException<string>).body)).toMatchObject({ reason: "AlreadyExists" });
    await core.deleteNamespacedConfigMap({ namespace: "crud", name: "cm" });
    const gone = await core.readNamespacedConfigMap({ namespace: "crud", name: "cm" }).catch((e) => e);
    expect((gone as ApiException<string>).code).toBe(404);
    const after = await core.listNamespace();
    expect(Number(after.metadata?.resourceVersion)).toBeGreaterThan(Number(before.metadata?.resourceVersion));
  });

  test("watch from a list's resourceVersion delivers each change as it happens", async () => {
    const { kc, core } = kubeClient(api.url, { caCert: api.caCert, token: api.token });
    const list = await core.listNamespace();
    const seen = collect(3);
    const first = collect(1);
    const watch = await new Watch(kc).watch(
      "/api/v1/namespaces",
      { resourceVersion: list.metadata?.resourceVersion },
      (type, obj) => {
        seen.callback(type, obj);
        first.callback(type, obj);
      },
      () => {},
    );
    try {
      api.store.create("namespaces", undefined, { metadata: { name: "w1" } });
      await first.enough(); // delivered before the next change exists: streamed, not buffered
      expect(seen.events).toEqual([{ type: "ADDED", name: "w1" }]);
      api.store.update("namespaces", undefined, "w1", { spec: { finalizers: [] } });
      api.store.delete("namespaces", undefined, "w1");
      await seen.enough();
      expect(seen.events.map((e) => e.type)).toEqual(["ADDED", "MODIFIED", "DELETED"]);
    } finally {
      watch.abort();
    }
  });

  test("watch from an older resourceVersion replays what happened since; none or 0 starts with the state", async () => {
    const { kc } = kubeClient(api.url, { caCert: api.caCert, token: api.token });
    const rv = api.store.resourceVersion;
    api.store.create("namespaces", undefined, { metadata: { name: "replay" } });
    const replay = collect(1);
    const w1 = await new Watch(kc).watch(
      "/api/v1/namespaces",
      { resourceVersion: String(rv) },
      replay.callback,
      () => {},
    );
    await replay.enough();
    w1.abort();
    expect(replay.events).toEqual([{ type: "ADDED", name: "replay" }]);

    const names = api.store.list("namespaces", undefined).map((n) => n.metadata.name);
    const state = collect(names.length);
    const w2 = await new Watch(kc).watch("/api/v1/namespaces", {}, state.callback, () => {});
    await state.enough();
    w2.abort();
    expect(state.events.map((e) => e.name).sort()).toEqual(names.sort());
    expect(new Set(state.events.map((e) => e.type))).toEqual(new Set(["ADDED"]));
  });

  test("pods/log?follow=true streams lines as they are appended", async () => {
    api.store.create("pods", "default", { metadata: { name: "logger" } });
    api.appendLog("default", "logger", "first");
    const req = request(`${api.url}/api/v1/namespaces/default/pods/logger/log?follow=true`, {
      ca: api.caCert,
      headers: { authorization: `Bearer ${api.token}` },
    }).end();
    const [res] = await once(req, "response", { signal: AbortSignal.timeout(10_000) });
    res.setEncoding("utf8");
    const [chunk1] = await once(res, "data", { signal: AbortSignal.timeout(10_000) });
    expect(chunk1).toBe("first\n");
    api.appendLog("default", "logger", "second");
    const [chunk2] = await once(res, "data", { signal: AbortSignal.timeout(10_000) });
    expect(chunk2).toBe("second\n");
    req.destroy();
  });

  test("exec-like Upgrade: 101, then bytes both ways; headers recorded", async () => {
    api.store.create("pods", "default", { metadata: { name: "shell" } });
    const port = Number(new URL(api.url).port);
    const { socket, received, head } = await rawUpgrade(
      { port, ca: api.caCert },
      "/api/v1/namespaces/default/pods/shell/exec?command=sh",
      { authorization: `Bearer ${api.token}`, upgrade: "SPDY/3.1", "impersonate-user": "jane" },
    );
    try {
      expect(head).toMatch(/^HTTP\/1.1 101 /);
      await received.until("exec default/shell\n");
      socket.write("ping\n");
      await received.until("ping\n");
      const recorded = api.requests.findLast((r) => r.path.includes("/shell/exec"));
      expect(recorded?.headers["impersonate-user"]).toBe("jane");
    } finally {
      socket.destroy();
    }
  });
});
