// Cluster views end to end, with real components: the Kubernetes test server, agentk (its real
// informers through @kubernetes/client-node) connected to kas replica A, replica B sharing a real
// redis-server, and a real EventSource client on B's API. A change made in the Kubernetes API shows
// at B; 1,000 pod changes arrive as a handful of messages; a watch resumed from a version the
// server no longer holds is relisted (410 Gone) and the views stay right.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { AgentViews, ViewEvent } from "../../../modules/cluster_views/views.ts";
import { TOKEN } from "../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { GitRepo } from "../../support/git-repo.ts";
import { type KubeApiServer, startKubeApiServer } from "../../support/kube-apiserver.ts";
import { RedisServer } from "../../support/redis-server.ts";
import { until } from "../../support/until.ts";
import { kasApi, metricsOf, metricValue, tokenLine } from "../agent_configuration/helpers.ts";
import { type EventsClient, eventsOf, pod, seedCluster, setNodeReady, viewsConfig } from "./helpers.ts";

const CONFIG = ".gitlab/agents/prod/config.yaml";
const WAIT = 15_000;

describe("cluster views: Kubernetes API -> agentk -> kas A -> Redis -> kas B -> SSE", () => {
  let dir: string;
  let redis: RedisServer;
  let repo: GitRepo;
  let kube: KubeApiServer;
  let a: InProcessKas;
  let b: InProcessKas;
  let agent: InProcessAgentk;
  let sse: EventsClient;

  const viewsAt = async (kas: InProcessKas): Promise<AgentViews | undefined> => {
    const res = await kasApi(kas, "/api/v1/agents/42/views");
    if (res.status === 404) {
      await res.arrayBuffer();
      return undefined;
    }
    expect(res.status).toBe(200);
    return (await res.json()) as AgentViews;
  };
  const agentMetrics = () => metricsOf(agent.agent.urls.observability!);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "cluster-views-e2e-"));
    redis = await RedisServer.start();
    repo = await GitRepo.init();
    await repo.commit({ [CONFIG]: viewsConfig() });
    // A short history: 60 changes elsewhere make a paused watch's version too old (410 Gone).
    kube = await startKubeApiServer({ historyLimit: 60 });
    seedCluster(kube);
    const tokensFile = join(dir, "tokens.yaml");
    await writeFile(
      tokensFile,
      `${tokenLine(TOKEN, { agentId: 42, projectId: 7, agentName: "prod", repository: repo.path })}\n`,
    );
    const adjust = (config: InProcessKas["config"]) => {
      config.agent.staticTokensFile = tokensFile;
    };
    const cluster = { redis: { host: redis.host, port: redis.port } };
    a = await startInProcessKas(adjust, cluster);
    b = await startInProcessKas(adjust, cluster);
    agent = await startInProcessAgentk({
      kasUrl: a.addresses.agent,
      token: TOKEN,
      kubernetes: await kube.writeKubeconfig(join(dir, "kubeconfig")),
      pod: { name: "agentk-0", namespace: "default" },
    });
  }, 30_000);
  afterAll(async () => {
    sse?.close();
    await agent?.stop();
    await Promise.all([a?.close(), b?.close()]);
    await kube?.close();
    await redis?.close();
    await repo?.remove();
    await rm(dir, { recursive: true, force: true });
  });

  test("B's API shows the views agentk pushed to A", async () => {
    await until(async () => (await viewsAt(b))?.views.nodes?.total === 2, WAIT, "the views at B");
    const views = (await viewsAt(b))!;
    expect(views).toMatchObject({ agentId: "42", connected: true });
    expect(views.views.nodes).toEqual({
      total: 2,
      ready: 2,
      capacity: { cpuMillis: 8000, memoryBytes: 2 * 16 * 2 ** 30 },
      allocatable: { cpuMillis: 7000, memoryBytes: 2 * 15 * 2 ** 30 },
      problems: [],
    });
    expect(views.views.pods?.namespaces.apps).toEqual({
      phases: { Pending: 0, Running: 2, Succeeded: 0, Failed: 0, Unknown: 0 },
      restarts: 0,
    });
    expect(views.views.workloads?.rollouts).toEqual([
      expect.objectContaining({ kind: "Deployment", name: "web", desired: 2, ready: 2, state: "complete" }),
    ]);
    expect(views.views.warnings).toEqual({ latest: [] });
  });

  test("a node going NotReady reaches an SSE client of B", async () => {
    sse = eventsOf(b, "/api/v1/agents/42/events");
    await sse.opened;
    await until(() => sse.events.some((e) => e.type === "snapshot"), WAIT, "the snapshot");
    setNodeReady(kube, "node-b", false);
    const isNotReady = (e: ViewEvent) => e.type === "change" && e.views.nodes?.ready === 1;
    await until(() => sse.events.some(isNotReady), WAIT, "the change at B");
    const change = sse.events.find(isNotReady)!;
    // Only the view that changed travels.
    expect(Object.keys((change as Extract<ViewEvent, { type: "change" }>).views)).toEqual(["nodes"]);
  });

  test("1,000 pod changes arrive as a handful of messages, and their counts are right", async () => {
    const before = metricValue(await agentMetrics(), "agentk_cluster_views_messages_total", {
      kind: "change",
    });
    const from = sse.events.length;
    const { store } = kube;
    store.create("namespaces", undefined, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "burst" },
    });
    for (let i = 0; i < 500; i++) store.create("pods", "burst", pod(`p-${i}`, "Pending"));
    for (let i = 0; i < 500; i++)
      store.update("pods", "burst", `p-${i}`, {
        status: { phase: "Running", containerStatuses: [{ restartCount: 1 }] },
      });
    const done = (e: ViewEvent) =>
      e.type === "change" && e.views.pods?.namespaces.burst?.phases.Running === 500;
    await until(() => sse.events.slice(from).some(done), WAIT, "the burst's final counts at B");
    expect(sse.events.slice(from).find(done)).toMatchObject({
      views: { pods: { namespaces: { burst: { phases: { Running: 500, Pending: 0 }, restarts: 500 } } } },
    });
    const messages =
      metricValue(await agentMetrics(), "agentk_cluster_views_messages_total", { kind: "change" }) - before;
    expect(messages).toBeGreaterThanOrEqual(1);
    expect(messages).toBeLessThanOrEqual(30); // 1,000 watch events; coalesced every 100 ms
    // What B's subscriber got is what agentk sent: no event per pod.
    expect(sse.events.slice(from).filter((e) => e.type === "change").length).toBeLessThanOrEqual(messages);
  });

  test("a watch resumed from a version the server no longer holds relists (410 Gone); the views stay right", async () => {
    const relists = async () => metricValue(await agentMetrics(), "agentk_cluster_views_relists_total");
    const before = await relists();
    const { store } = kube;
    // 80 changes to a kind no view watches: the informers' versions fall out of the 60-change history.
    for (let i = 0; i < 80; i++)
      store.create("configmaps", "default", {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: `c-${i}` },
      });
    kube.endWatches();
    await until(async () => (await relists()) >= before + 5, WAIT, "every informer relisted");
    // The cache after the relist: a pod deleted now is counted out.
    store.delete("pods", "apps", "web-1");
    await until(
      async () => (await viewsAt(b))?.views.pods?.namespaces.apps?.phases.Running === 1,
      WAIT,
      "the deletion at B",
    );
    expect(
      kube.requests.some((r) => r.path.includes("watch=true") && r.path.includes("resourceVersion=")),
    ).toBe(true);
  });

  test("the agent's tunnel going away shows as disconnected at B", async () => {
    await agent.stop();
    await until(() => sse.events.some((e) => e.type === "disconnected"), WAIT, "the disconnection at B");
    expect((await viewsAt(b))?.connected).toBe(false);
  });
});
