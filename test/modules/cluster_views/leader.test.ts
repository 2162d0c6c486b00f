// Two agentk replicas of one agent: only the leader (its Lease in the Kubernetes test server) runs
// informers and streams views; when it stops, the other takes over and its snapshot, with a seq
// above every one of the old leader's, replaces the views at kas.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { AgentViews } from "../../../modules/cluster_views/views.ts";
import { TOKEN } from "../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { GitRepo } from "../../support/git-repo.ts";
import { type KubeApiServer, startKubeApiServer } from "../../support/kube-apiserver.ts";
import { until } from "../../support/until.ts";
import { kasApi, metricsOf, metricValue, tokenLine } from "../agent_configuration/helpers.ts";
import { seedCluster, setNodeReady, viewsConfig } from "./helpers.ts";

let dir: string;
let repo: GitRepo;
let kube: KubeApiServer;
let kas: InProcessKas;
const agents: InProcessAgentk[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "cluster-views-leader-"));
  repo = await GitRepo.init();
  await repo.commit({ ".gitlab/agents/prod/config.yaml": viewsConfig() });
  kube = await startKubeApiServer();
  seedCluster(kube);
  const tokensFile = join(dir, "tokens.yaml");
  await writeFile(
    tokensFile,
    `${tokenLine(TOKEN, { agentId: 42, projectId: 7, agentName: "prod", repository: repo.path })}\n`,
  );
  kas = await startInProcessKas((config) => {
    config.agent.staticTokensFile = tokensFile;
  });
  const kubeconfig = await kube.writeKubeconfig(join(dir, "kubeconfig"));
  for (const name of ["agentk-0", "agentk-1"]) {
    agents.push(
      await startInProcessAgentk({
        kasUrl: kas.addresses.agent,
        token: TOKEN,
        kubernetes: kubeconfig,
        pod: { name, namespace: "default" },
      }),
    );
  }
}, 30_000);
afterAll(async () => {
  for (const a of agents) await a.stop();
  await kas?.close();
  await kube?.close();
  await repo?.remove();
  await rm(dir, { recursive: true, force: true });
});

const views = async (): Promise<AgentViews | undefined> => {
  const res = await kasApi(kas, "/api/v1/agents/42/views");
  return res.status === 200 ? ((await res.json()) as AgentViews) : undefined;
};
const snapshots = async (a: InProcessAgentk) =>
  metricValue(await metricsOf(a.agent.urls.observability!), "agentk_cluster_views_messages_total", {
    kind: "snapshot",
  });

test("only the leader streams; the next leader's snapshot replaces the views", async () => {
  await until(async () => (await views())?.views.nodes?.ready === 2, 15_000, "the first views");
  const sent = await Promise.all(agents.map(snapshots));
  expect(sent.filter((n) => n > 0)).toHaveLength(1); // one replica streams
  expect(metricValue(await metricsOf(kas.addresses.observability), "kas_cluster_views_streams")).toBe(1);
  const leader = sent[0]! > 0 ? 0 : 1;
  const before = (await views())!.seq;

  await agents[leader]!.stop(); // releases the Lease: the other replica takes over
  setNodeReady(kube, "node-a", false); // seen only by the new leader's informers
  await until(async () => (await views())?.views.nodes?.ready === 1, 20_000, "the new leader's views");
  const after = (await views())!;
  expect(after.seq).toBeGreaterThan(before);
  expect(after.connected).toBe(true);
  expect(await snapshots(agents[1 - leader]!)).toBeGreaterThan(0);
}, 40_000);
