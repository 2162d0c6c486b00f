// The GitOps module's agentk half against a small in-test GitopsService (grpc-js, insecure, on a
// loopback port; its channel stands in for kasRpc) and the Kubernetes test server: commits streamed
// in chunks -> applied -> ReportSync with per-object results; the last commit sent back as
// commit_id on reconnect; configuration changes add and remove streams; too-large commits refused;
// drift undone on the drift interval.
import { EventEmitter, once } from "node:events";
import * as grpc from "@grpc/grpc-js";
import { KubernetesObjectApi, PatchStrategy } from "@kubernetes/client-node";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { agentConfigurationSchema } from "../../../../modules/agentcfg/index.ts";
import { gitopsAgentModule } from "../../../../modules/gitops/agentk/module.ts";
import {
  type AgentConfiguration,
  type AgentkModuleDeps,
  LatestValue,
  type Module,
} from "../../../../modules/runtime/index.ts";
import {
  type GetObjectsToSynchronizeRequest,
  type GetObjectsToSynchronizeResponse,
  GitopsServiceService,
  type ReportSyncRequest,
} from "../../../../proto/gen/gitops/v1/gitops.ts";
import { createLogger } from "../../../../tool/observability/index.ts";
import { type KubeApiServer, startKubeApiServer } from "../../../support/kube-apiserver.ts";
import { configMap, kubeConfigFor, namespace, yamlDocs } from "./helpers.ts";

type Stream = grpc.ServerWritableStream<GetObjectsToSynchronizeRequest, GetObjectsToSynchronizeResponse>;

/** A GitopsService the test drives: it records streams and reports, and sends commits when told. */
class FakeKas extends EventEmitter<{ stream: [Stream]; ended: [Stream]; report: [ReportSyncRequest] }> {
  readonly server = new grpc.Server();
  readonly streams: Stream[] = [];
  readonly reports: ReportSyncRequest[] = [];
  port = 0;

  async start() {
    this.server.addService(GitopsServiceService, {
      getObjectsToSynchronize: (call: Stream) => {
        this.streams.push(call);
        call.on("cancelled", () => this.emit("ended", call));
        this.emit("stream", call);
      },
      reportSync: (call: grpc.ServerUnaryCall<ReportSyncRequest, object>, cb: grpc.sendUnaryData<object>) => {
        this.reports.push(call.request);
        cb(null, {});
        this.emit("report", call.request);
      },
    });
    this.port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) =>
        err ? reject(err) : resolve(port),
      ),
    );
  }

  /** The open stream of `projectId` (waits for one to open if none is). */
  async streamOf(projectId: string): Promise<Stream> {
    for (;;) {
      const open = this.streams.find(
        (s) => s.request.projectId === projectId && !s.cancelled && !ended.has(s),
      );
      if (open) return open;
      await once(this, "stream");
    }
  }

  /** Sends one commit: a header, each file in two chunks, a trailer. */
  sendCommit(stream: Stream, commitId: string, files: Record<string, string>) {
    stream.write({ header: { commitId, projectId: "0", agentId: "0" } });
    for (const [source, text] of Object.entries(files)) {
      const data = Buffer.from(text);
      const half = Math.floor(data.length / 2);
      stream.write({ object: { source, data: data.subarray(0, half) } });
      stream.write({ object: { source, data: data.subarray(half) } });
    }
    stream.write({ trailer: {} });
  }

  /** The next report for `projectId` that `matches` (drift syncs report too, at any time). */
  async nextReport(projectId: string, matches: (r: ReportSyncRequest) => boolean = () => true) {
    for (;;) {
      const [report] = (await once(this, "report")) as [ReportSyncRequest];
      if (report.projectId === projectId && matches(report)) return report;
    }
  }
}
const ended = new WeakSet<Stream>();

let api: KubeApiServer;
let kas: FakeKas;
let channel: grpc.Channel;
let module: Module;
const stop = new AbortController();
const registry = new Registry();
const configuration = new LatestValue<AgentConfiguration>();

const configWith = (...projects: object[]) =>
  agentConfigurationSchema.parse({ gitops: { manifest_projects: projects } }) as AgentConfiguration;
const statuses = (r: ReportSyncRequest) =>
  Object.fromEntries(r.objects.map((o) => [`${o.kind}/${o.namespace}/${o.name}`, o.status]));
const syncs = async () =>
  Object.fromEntries(
    (await registry.getSingleMetric("agentk_gitops_syncs_total")!.get()).values.map((v) => [
      v.labels.result,
      v.value,
    ]),
  );

beforeAll(async () => {
  api = await startKubeApiServer();
  kas = new FakeKas();
  kas.on("ended", (s) => ended.add(s));
  await kas.start();
  channel = new grpc.Channel(`127.0.0.1:${kas.port}`, grpc.credentials.createInsecure(), {});
  const deps = {
    log: createLogger({ level: (process.env.TEST_LOG_LEVEL ?? "silent") as "silent" }),
    registry,
    kasRpc: channel,
    configuration,
  } as unknown as AgentkModuleDeps;
  module = await gitopsAgentModule({
    kubeConfig: async () => kubeConfigFor(api),
    backoff: { initialMs: 5, maxMs: 20 },
    pollIntervalMs: 5,
    maxCommitBytes: 64 * 1024,
    driftIntervalMs: 200,
  }).create(deps);
  await module.start!(stop.signal);
});
afterAll(async () => {
  stop.abort();
  await module?.close?.(1000);
  channel?.close();
  kas?.server.forceShutdown();
  await api?.close();
});

describe("the GitOps module (agentk)", () => {
  test("a commit streamed in chunks is applied and reported; the next one too; commit_id on reconnect", async () => {
    const opened = kas.streamOf("group/one");
    configuration.set(configWith({ id: "group/one", default_namespace: "one", paths: [{ glob: "k8s/**" }] }));
    const stream = await opened;
    expect(stream.request).toMatchObject({
      projectId: "group/one",
      commitId: "",
      paths: [{ glob: "k8s/**" }],
    });

    const reported = kas.nextReport("group/one", (r) => r.commitId === "c1");
    kas.sendCommit(stream, "c1", {
      "k8s/ns.yaml": yamlDocs(namespace("one")),
      "k8s/app.yaml": yamlDocs(configMap("app", undefined, { v: "1" }), configMap("extra", undefined, {})),
    });
    const first = await reported;
    expect(first).toMatchObject({ projectId: "group/one", commitId: "c1", error: "", mode: "" });
    expect(statuses(first)).toEqual({
      "Namespace//one": "applied",
      "ConfigMap/one/app": "applied",
      "ConfigMap/one/extra": "applied",
    });
    expect(first.objects.find((o) => o.name === "app")).toMatchObject({ source: "k8s/app.yaml", group: "" });
    expect(api.store.get("configmaps", "one", "app").data).toEqual({ v: "1" });

    const reported2 = kas.nextReport("group/one", (r) => r.commitId === "c2");
    kas.sendCommit(stream, "c2", {
      "k8s/ns.yaml": yamlDocs(namespace("one")),
      "k8s/app.yaml": yamlDocs(configMap("app", undefined, { v: "2" })),
    });
    const second = await reported2;
    expect(second.commitId).toBe("c2");
    expect(statuses(second)).toEqual({
      "Namespace//one": "unchanged",
      "ConfigMap/one/app": "applied",
      "ConfigMap/one/extra": "pruned",
    });
    expect(api.store.has("configmaps", "one", "extra")).toBe(false);
    expect((await syncs()).success).toBeGreaterThanOrEqual(2);

    // kas ends the stream (a tunnel rotating): the agent comes back with the commit it applied.
    const reopened = new Promise<Stream>((resolve) =>
      kas.on("stream", (s) => s.request.projectId === "group/one" && resolve(s)),
    );
    stream.emit("error", { code: grpc.status.UNAVAILABLE, details: "tunnel rotating" });
    ended.add(stream);
    expect((await reopened).request.commitId).toBe("c2");
  });

  test("drift is undone on the drift interval", async () => {
    const objects = KubernetesObjectApi.makeApiClient(kubeConfigFor(api));
    await objects.patch(
      {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "app", namespace: "one" },
        data: { v: "tampered" },
      },
      undefined,
      undefined,
      "kubectl-edit",
      undefined,
      PatchStrategy.MergePatch,
    );
    // The next sync that changed it (a drift sync may have run just before the change).
    const report = await kas.nextReport("group/one", (r) => statuses(r)["ConfigMap/one/app"] === "applied");
    expect(report.commitId).toBe("c2");
    expect(statuses(report)["ConfigMap/one/app"]).toBe("applied");
    expect(api.store.get("configmaps", "one", "app").data).toEqual({ v: "2" });
  });

  test("configuration changes add and remove streams; projects are independent", async () => {
    const one = await kas.streamOf("group/one");
    const twoOpened = kas.streamOf("group/two");
    configuration.set(
      configWith(
        { id: "group/one", default_namespace: "one", paths: [{ glob: "k8s/**" }] },
        { id: "group/two", default_namespace: "default" },
      ),
    );
    const two = await twoOpened;
    expect(two.request.paths).toEqual([{ glob: "**/*.{yaml,yml,json}" }]);
    expect(one.cancelled).toBe(false); // unchanged project: its stream stays

    // A commit over the limit is refused (reported, not applied); project one is unaffected.
    const refused = kas.nextReport("group/two");
    kas.sendCommit(two, "big", { "big.yaml": `# ${"x".repeat(70 * 1024)}\n` });
    const r = await refused;
    expect(r).toMatchObject({
      commitId: "big",
      objects: [],
      error: expect.stringMatching(/exceed 65536 bytes/),
    });
    expect((await syncs()).too_large).toBe(1);

    const good = kas.nextReport("group/two", (r) => r.commitId === "t1");
    kas.sendCommit(two, "t1", { "cm.yaml": yamlDocs(configMap("two-cm", undefined, {})) });
    expect(statuses(await good)).toEqual({ "ConfigMap/default/two-cm": "applied" });

    // Project one removed: its stream is cancelled; two's stays.
    const oneEnded = new Promise<void>((resolve) => kas.on("ended", (s) => s === one && resolve()));
    configuration.set(configWith({ id: "group/two", default_namespace: "default" }));
    await oneEnded;
    expect(two.cancelled).toBe(false);

    // Options changed (dry run), same stream: the last commit is applied again with them.
    const dry = kas.nextReport("group/two", (r) => r.mode === "dry_run");
    configuration.set(
      configWith({ id: "group/two", default_namespace: "default", dry_run_strategy: "server" }),
    );
    const d = await dry;
    expect(d).toMatchObject({ commitId: "t1", mode: "dry_run" });
    expect(two.cancelled).toBe(false);

    // A new ref: a new stream, which starts from no commit.
    const reopened = new Promise<Stream>((resolve) =>
      kas.on("stream", (s) => s.request.projectId === "group/two" && resolve(s)),
    );
    configuration.set(
      configWith({ id: "group/two", default_namespace: "default", ref: { branch: "stable" } }),
    );
    const three = await reopened;
    expect(three.request).toMatchObject({ commitId: "", ref: { branch: "stable" } });
  });
});
