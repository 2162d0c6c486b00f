// The live dashboard and the ActionCable broadcasts end to end: changes made in the Kubernetes test
// server (a Deployment scaled, then stuck; a node going NotReady; a pod crash-looping; a Warning
// event; the agent disconnecting) go through agentk's informers and views, its tunnel to kas, kas's
// views hub and the dashboard's history, and show up
// - on the dashboard page in a real headless Chromium (logged in with the dashboard token), and
// - at a client of a real ActionCable (Rails' actioncable under puma, Redis adapter, channel prefix)
//   subscribed to `cluster_agent:42`.
// Every wait is on the page's content or on a message, with a deadline.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { ViewEvent } from "../../modules/cluster_views/views.ts";
import { TOKEN } from "../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../kas/support/in-process.ts";
import { ActionCableClient } from "../support/actioncable-client.ts";
import { ActionCableServer } from "../support/actioncable-server.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../support/agentk-in-process.ts";
import { Chromium } from "../support/chromium.ts";
import { GitRepo } from "../support/git-repo.ts";
import { VERSION as KUBE_VERSION } from "../support/kube/discovery.ts";
import { type KubeApiServer, startKubeApiServer } from "../support/kube-apiserver.ts";
import {
  addWarningEvent,
  scaleDeployment,
  seedCluster,
  setDeploymentStuck,
  setNodeReady,
  setPodCrashLooping,
} from "../support/kube-cluster.ts";
import { RedisServer } from "../support/redis-server.ts";

const DASHBOARD_TOKEN = "e2e-dashboard-token-0123456789";
const CHANNEL_PREFIX = "gitlab_e2e";
const NS = "shop";
/** Deadline of each change's way from the Kubernetes API to the page or ActionCable's client. */
const WAIT = 15_000;

let dir: string;
let kube: KubeApiServer;
let redis: RedisServer;
let cable: ActionCableServer;
let configRepo: GitRepo;
let manifests: GitRepo;
/** The commit of the agent's manifest project. */
let manifestsCommit: string;
/** The commit of the agent's configuration file. */
let configCommit: string;
let kas: InProcessKas;
let agent: InProcessAgentk | undefined;
let browser: Chromium;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "dashboard-e2e-"));
  [kube, redis, configRepo, browser] = await Promise.all([
    startKubeApiServer(),
    RedisServer.start(),
    GitRepo.init(),
    Chromium.launch(),
  ]);
  manifests = await GitRepo.init();
  manifestsCommit = await manifests.commit({
    "cm.yaml":
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: shop\ndata:\n  mode: fast\n",
  });
  seedCluster(kube.store, NS, { cart: 3, api: 2 });
  cable = await ActionCableServer.start({
    redisUrl: `redis://127.0.0.1:${redis.port}`,
    channelPrefix: CHANNEL_PREFIX,
  });
  configCommit = await configRepo.commit({
    ".gitlab/agents/prod/config.yaml":
      "cluster_views: {}\ngitops:\n  manifest_projects:\n    - id: group/manifests\n      default_namespace: shop\n",
  });
  const tokensFile = join(dir, "tokens.yaml");
  await writeFile(
    tokensFile,
    `${TOKEN}: ${JSON.stringify({
      agentId: 42,
      projectId: 7,
      agentName: "prod",
      repository: configRepo.path,
      manifest_projects: { "group/manifests": manifests.path },
    })}\n`,
  );
  const tokenFile = join(dir, "dashboard_token");
  await writeFile(tokenFile, DASHBOARD_TOKEN);
  kas = await startInProcessKas((config) => {
    config.agent.staticTokensFile = tokensFile;
    config.dashboard.listen.address = { host: "127.0.0.1", port: 0 };
    config.dashboard.tokenFile = tokenFile;
    config.actionCable.redisUrl = `redis://127.0.0.1:${redis.port}`;
    config.actionCable.channelPrefix = CHANNEL_PREFIX;
  });
  agent = await startInProcessAgentk({
    kasUrl: kas.addresses.agent,
    token: TOKEN,
    kubernetes: await kube.writeKubeconfig(join(dir, "kubeconfig")),
    pod: { name: "agentk-e2e", namespace: "default" },
  });
});

afterAll(async () => {
  await agent?.stop(0);
  await browser?.close();
  await kas?.close();
  await cable?.close();
  await Promise.all([redis?.close(), kube?.close(), configRepo?.remove(), manifests?.remove()]);
  await rm(dir, { recursive: true, force: true });
});

const field = (page: Page, name: string) => page.locator(`[data-agent="42"] [data-field="${name}"]`);
/** Waits, up to WAIT, for the agent's field to show `text`. */
const shows = (page: Page, name: string, text: string | RegExp) =>
  field(page, name).filter({ hasText: text }).first().waitFor({ timeout: WAIT });
/** Waits, up to WAIT, for the feed of changes to list `text`. */
const feedShows = (page: Page, text: string | RegExp) =>
  page.locator('[data-field="feed"] li').filter({ hasText: text }).first().waitFor({ timeout: WAIT });

test("changes in the cluster reach the dashboard page and ActionCable's subscribers", async () => {
  const cableClient = await ActionCableClient.connect(cable.url);
  try {
    await cableClient.subscribe("ClusterAgentChannel", { agent_id: "42" });
    const page = await browser.page();
    await page.goto(kas.addresses.dashboard!);
    expect(new URL(page.url()).pathname).toBe("/login");
    await page.fill("#token", DASHBOARD_TOKEN);
    await page.click("button[type=submit]");
    await page.waitForURL(`${kas.addresses.dashboard}/`, { timeout: WAIT });

    // Who the agent is: its name, from authentication.
    await shows(page, "name", "prod");

    // What agentk saw first: three Ready nodes, five Running pods, nothing rolling out.
    await shows(page, "status", "connected");
    await shows(page, "nodes-ready", "3/3");
    await shows(page, "pods", "5");
    await shows(page, "rollouts", "none");

    // A Deployment scaled, its new pods not ready yet: a rollout in progress.
    scaleDeployment(kube.store, NS, "cart", 5);
    kube.store.setDeploymentStatus(NS, "cart", 3);
    await shows(page, "rollouts", `Deployment ${NS}/cart`);
    await shows(page, "rollouts-count", "1 rolling out");
    await feedShows(page, `Deployment ${NS}/cart scaled from 3 to 5 replicas`);

    // A node goes NotReady.
    setNodeReady(kube.store, "node-2", false);
    await shows(page, "nodes-ready", "2/3");
    await feedShows(page, "Node node-2 node not ready: KubeletNotReady, container runtime is down");
    const change = await cableClient.message<ViewEvent>(
      (m) => m.type === "change" && m.views.nodes?.ready === 2,
      WAIT,
      `the NotReady node on ActionCable (its log: ${cable.output.slice(-2000)})`,
    );
    expect(change).toMatchObject({ agentId: "42", views: { nodes: { total: 3, ready: 2 } } });
    expect(
      cableClient.messages.some(
        (m) =>
          (m as ViewEvent).type === "change" &&
          (m as Extract<ViewEvent, { type: "change" }>).views.workloads?.rollouts.some(
            (r) => r.name === "cart" && r.state !== "complete",
          ),
      ),
    ).toBe(true);

    // A pod crash-loops (its restarts counted), the kubelet records a Warning about it, and the
    // Deployment's controller gives up on the rollout.
    setPodCrashLooping(kube.store, NS, "cart-0", 4);
    addWarningEvent(
      kube.store,
      NS,
      { kind: "Pod", name: "cart-0" },
      "BackOff",
      "Back-off restarting failed container cart",
    );
    setDeploymentStuck(kube.store, NS, "cart", 3);
    await shows(page, "restarts", "4 restarts");
    await shows(page, "rollout-why", "ProgressDeadlineExceeded");
    await feedShows(page, `Pod ${NS}/cart-0 CrashLoopBackOff, 4 restarts`);
    await feedShows(page, `Pod ${NS}/cart-0 BackOff: Back-off restarting failed container cart`);
    await feedShows(page, `Deployment ${NS}/cart rollout stuck at 5/5 updated: ProgressDeadlineExceeded`);
    await shows(page, "problems", "1 of 3 nodes not ready");

    // Its agentk and Kubernetes versions (reported over its tunnel), its configuration's commit.
    await shows(page, "replicas", "1 agentk · 1 tunnel,");
    await shows(page, "versions", `Kubernetes ${KUBE_VERSION.gitVersion}`);
    await shows(page, "configuration", `commit ${configCommit.slice(0, 8)}`);
    // GitOps: the manifest project's commit, applied by agentk, its sync reported to kas.
    await shows(
      page,
      "gitops",
      `group/manifests commit ${manifestsCommit.slice(0, 8)} · 1 applied, 0 failed`,
    );

    // The drill-down: the node and its condition, the pod and why, the object behind the warning.
    await page.locator('[data-agent="42"] summary').click();
    await shows(page, "node-problems", "Ready=False (KubeletNotReady): container runtime is down");
    await shows(page, "pod-problems", `Pod ${NS}/cart-0 Running · CrashLoopBackOff · 4 restarts`);
    await shows(page, "warnings", `Pod ${NS}/cart-0`);
    await field(page, "history").locator("figure").nth(5).waitFor({ timeout: WAIT });

    await mkdir(".tmp", { recursive: true });
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.screenshot({ path: ".tmp/dashboard-e2e.png", fullPage: true });
    await page.setViewportSize({ width: 390, height: 844 });
    await page.screenshot({ path: ".tmp/dashboard-e2e-phone.png", fullPage: true });
    await page.setViewportSize({ width: 1280, height: 900 });

    // The agent goes away: the page and ActionCable are told.
    await agent!.stop(0);
    agent = undefined;
    await shows(page, "status", "disconnected");
    await feedShows(page, "Agent 42 agent disconnected");
    await cableClient.message<ViewEvent>(
      (m) => m.type === "disconnected",
      WAIT,
      "the disconnection on ActionCable",
    );
    await page.screenshot({ path: ".tmp/dashboard-e2e-disconnected.png", fullPage: true });
  } finally {
    cableClient.close();
  }
});
