// The dashboard page in a real headless Chromium (Debian's, driven by playwright-core): the login
// form and its layout, then the page following the views hub live: agents by name with their
// state, what changed (with labelled times), the drill-down, the history's charts, a hundred
// agents with the troubled first, keyboard and phone-sized use. Events come from an in-memory hub
// here and the history is recorded by the dashboard's own recorder; the whole chain (Kubernetes
// test server -> agentk -> kas -> page) is in test/e2e/dashboard.test.ts.
import { mkdir } from "node:fs/promises";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { AgentViews, Rollout } from "../../../modules/cluster_views/views.ts";
import type { StatusSources } from "../../../modules/dashboard/kas/agent-status.ts";
import { AgentStatuses } from "../../../modules/dashboard/kas/agent-status.ts";
import { bundleDashboard } from "../../../modules/dashboard/kas/assets.ts";
import { MemoryHistoryStore } from "../../../modules/dashboard/kas/history-store.ts";
import { type Recorder, recordHistory } from "../../../modules/dashboard/kas/recorder.ts";
import { type DashboardServer, serveDashboard } from "../../../modules/dashboard/kas/server.ts";
import { Chromium } from "../../support/chromium.ts";
import { MemoryViewsHub } from "../../support/memory-views-hub.ts";

const TOKEN = "browser-test-dashboard-token";
const WAIT = 10_000;
const DESKTOP = { width: 1280, height: 900 };
const PHONE = { width: 390, height: 844 };
const quiet = { error: () => {}, debug: () => {}, info: () => {}, warn: () => {} };
const COMMIT = "0123456789abcdef0123456789abcdef01234567";

const rollout = (name: string, desired: number, updated: number, state: Rollout["state"]): Rollout => ({
  kind: "Deployment",
  namespace: "shop",
  name,
  desired,
  updated,
  ready: updated,
  available: updated,
  state,
  ...(state === "stuck" && {
    reason: "ProgressDeadlineExceeded",
    message: 'ReplicaSet "cart-7d4b9c" has timed out progressing.',
  }),
});

interface Shape {
  ready?: number;
  rollouts?: Rollout[];
  restarts?: number;
  crashing?: boolean;
  warning?: boolean;
}

function agent(agentId: string, seq: number, s: Shape = {}): AgentViews {
  const res = { cpuMillis: 8000, memoryBytes: 32 * 2 ** 30 };
  const ready = s.ready ?? 3;
  const now = new Date().toISOString();
  return {
    agentId,
    connected: true,
    seq,
    updatedAt: now,
    views: {
      nodes: {
        total: 3,
        ready,
        capacity: res,
        allocatable: res,
        problems:
          ready < 3
            ? [
                {
                  name: "node-2",
                  ready: false,
                  conditions: [
                    {
                      type: "Ready",
                      status: "False",
                      reason: "KubeletNotReady",
                      message: "container runtime is down",
                    },
                  ],
                },
              ]
            : [],
      },
      pods: {
        namespaces: {
          shop: {
            phases: { Pending: 1, Running: 11, Succeeded: 0, Failed: 0, Unknown: 0 },
            restarts: s.restarts ?? 0,
          },
        },
        problems: s.crashing
          ? [
              {
                namespace: "shop",
                name: "cart-0",
                phase: "Running",
                reason: "CrashLoopBackOff",
                restarts: s.restarts ?? 0,
              },
            ]
          : [],
      },
      workloads: { rollouts: s.rollouts ?? [rollout("cart", 3, 3, "complete")], total: 4 },
      warnings: {
        latest: s.warning
          ? [
              {
                namespace: "shop",
                object: "Pod/cart-0",
                reason: "BackOff",
                message: "Back-off restarting failed container cart",
                count: 3,
                lastSeen: now,
              },
            ]
          : [],
      },
    },
  };
}

const sources: StatusSources = {
  connectedAgents: async () => [
    {
      agentId: "1",
      projectId: "7",
      agentName: "prod",
      tunnels: 2,
      connectedSince: new Date(Date.now() - 3600_000).toISOString(),
      pods: [{ name: "agentk-a", version: "v17.2.0", kubernetesVersion: { gitVersion: "v1.30.2" } }],
    },
  ],
  configuration: async (id) =>
    id === "1"
      ? {
          commitId: COMMIT,
          problem: {
            kind: "invalid",
            message: "config.yaml: gitops: unknown field",
            at: new Date().toISOString(),
          },
        }
      : undefined,
  gitops: async (id) =>
    new Map(
      id === "1"
        ? [
            [
              "group/manifests",
              {
                sync: {
                  commitId: COMMIT,
                  at: new Date().toISOString(),
                  counts: { applied: 4, unchanged: 2, failed: 1 },
                  error: "1 object failed",
                },
              },
            ],
          ]
        : [],
    ),
};

let hub: MemoryViewsHub;
let server: DashboardServer;
let browser: Chromium;
let recorder: Recorder;
beforeAll(async () => {
  hub = new MemoryViewsHub();
  hub.put(agent("1", 1));
  hub.put(agent("2", 1, { ready: 3 }));
  const history = new MemoryHistoryStore();
  recorder = recordHistory(hub, history, quiet);
  [server, browser] = await Promise.all([
    serveDashboard({
      listen: { address: { host: "127.0.0.1", port: 0 } },
      token: TOKEN,
      sessionTtlMs: 60_000,
      hub,
      statuses: new AgentStatuses(sources),
      history,
      assets: await bundleDashboard(),
      log: quiet,
    }),
    Chromium.launch(),
  ]);
});
afterAll(async () => {
  recorder?.close();
  await browser?.close();
  await server?.close(1000);
});

const card = (page: Page, agentId: string) => page.locator(`[data-agent="${agentId}"]`);
const field = (page: Page, agentId: string, name: string) =>
  card(page, agentId).locator(`[data-field="${name}"]`);
/** Waits, up to WAIT, for the field to show `text`. */
const shows = (page: Page, agentId: string, name: string, text: string | RegExp) =>
  field(page, agentId, name).filter({ hasText: text }).first().waitFor({ timeout: WAIT });
const feedShows = (page: Page, text: string | RegExp) =>
  page.locator('[data-field="feed"] li').filter({ hasText: text }).first().waitFor({ timeout: WAIT });

/** Every box of `inner` lies within `outer`'s. */
async function within(page: Page, inner: string, outer: string): Promise<void> {
  const o = (await page.locator(outer).boundingBox())!;
  const i = (await page.locator(inner).boundingBox())!;
  expect(i.x).toBeGreaterThanOrEqual(o.x);
  expect(i.y).toBeGreaterThanOrEqual(o.y);
  expect(i.x + i.width).toBeLessThanOrEqual(o.x + o.width);
  expect(i.y + i.height).toBeLessThanOrEqual(o.y + o.height);
}

test("the login page: the token field and button lie within their card, at desktop and phone sizes", async () => {
  const page = await browser.page();
  const missing: string[] = [];
  page.on("response", (r) => {
    if (r.status() === 404) missing.push(r.url());
  });
  await mkdir(".tmp", { recursive: true });
  for (const [size, viewport] of [
    ["desktop", DESKTOP],
    ["phone", PHONE],
  ] as const) {
    await page.setViewportSize(viewport);
    await page.goto(`${server.url}/login`);
    await within(page, "#token", "main.login");
    await within(page, "button[type=submit]", "main.login");
    const card = (await page.locator("main.login").boundingBox())!;
    expect(card.x + card.width).toBeLessThanOrEqual(viewport.width);
    await page.screenshot({ path: `.tmp/dashboard-login-${size}.png`, fullPage: true });
  }
  const icon = await page.request.get(`${server.url}/favicon.ico`);
  expect(icon.status()).toBe(200);
  expect(icon.headers()["content-type"]).toBe("image/svg+xml");
  expect(missing).toEqual([]);
  await page.close();
});

test("agents by name with their state; what changed, when and which object; the drill-down and history", async () => {
  const page = await browser.page();
  await page.setViewportSize(DESKTOP);
  const missing: string[] = [];
  page.on("response", (r) => {
    if (r.status() === 404) missing.push(r.url());
  });
  await page.goto(server.url);
  expect(new URL(page.url()).pathname).toBe("/login");
  await page.fill("#token", "not-the-token");
  await page.click("button[type=submit]");
  await page.getByRole("alert").filter({ hasText: "Wrong token" }).waitFor({ timeout: WAIT });
  await page.fill("#token", TOKEN);
  await page.click("button[type=submit]");
  await page.waitForURL(`${server.url}/`, { timeout: WAIT });
  await page.locator('[data-field="link"]').filter({ hasText: "live" }).waitFor({ timeout: WAIT });

  // At a glance: the name kas knows from authentication, replicas and since when, versions,
  // configuration commit and its error, GitOps per project.
  await shows(page, "1", "name", "prod");
  await shows(page, "1", "replicas", "1 agentk · 2 tunnels");
  await shows(page, "1", "replicas", "1 hour ago");
  await shows(page, "1", "versions", "agentk v17.2.0 · Kubernetes v1.30.2");
  await shows(page, "1", "configuration", "commit 01234567");
  await shows(page, "1", "configuration", "gitops: unknown field");
  await shows(page, "1", "gitops", "group/manifests commit 01234567 · 6 applied, 1 failed");
  await shows(page, "1", "gitops", "1 object failed");
  await shows(page, "1", "freshness", "updated");
  await shows(page, "2", "name", "agent 2");
  await shows(page, "1", "nodes-ready", "3/3");

  // The cluster changes: scaled, then stuck; a node NotReady; a pod crash-looping with restarts.
  hub.put(agent("1", 2, { rollouts: [rollout("cart", 5, 3, "progressing")] }));
  await feedShows(page, "Deployment shop/cart scaled from 3 to 5 replicas");
  await feedShows(page, "Deployment shop/cart rolling out: 3/5 updated, 3 ready");
  hub.put(
    agent("1", 3, {
      ready: 2,
      rollouts: [rollout("cart", 5, 3, "stuck")],
      restarts: 4,
      crashing: true,
      warning: true,
    }),
  );
  await feedShows(page, "Node node-2 node not ready: KubeletNotReady, container runtime is down");
  await feedShows(page, "Deployment shop/cart rollout stuck at 3/5 updated: ProgressDeadlineExceeded");
  await feedShows(page, "Pod shop/cart-0 CrashLoopBackOff, 4 restarts");
  await feedShows(page, "Pod shop/cart-0 BackOff: Back-off restarting failed container cart (×3)");
  await shows(page, "1", "nodes-ready", "2/3");
  await shows(page, "1", "restarts", "4 restarts");
  await shows(page, "1", "rollout-why", "ProgressDeadlineExceeded");
  await shows(page, "1", "problems", "1 of 3 nodes not ready");
  await shows(page, "1", "problems", "1 warning, latest: BackOff on Pod shop/cart-0");
  // Labelled times: how long ago, with the date and the zone (never a bare clock time).
  const time = page.locator('[data-field="feed"] li time').first();
  expect(await time.textContent()).toMatch(/ago|now/);
  expect(await time.locator(".abs").textContent()).toMatch(/\d{4}.*\d{2}:\d{2}:\d{2}.*(UTC|GMT|[A-Z]{3,4})/);
  // Trouble first: agent 1 is now above agent 2.
  const order = await page
    .locator("[data-agent]")
    .evaluateAll((els) => els.map((e) => e.getAttribute("data-agent")));
  expect(order).toEqual(["1", "2"]);

  // The drill-down, opened from the keyboard.
  const summary = card(page, "1").locator("summary");
  await summary.focus();
  await page.keyboard.press("Enter");
  await shows(
    page,
    "1",
    "node-problems",
    "Node node-2 ⚠ not readyReady=False (KubeletNotReady): container runtime is down",
  );
  await shows(page, "1", "pod-problems", "Pod shop/cart-0 Running · CrashLoopBackOff · 4 restarts");
  await shows(page, "1", "namespaces", "shop");
  await shows(page, "1", "warnings", "Pod shop/cart-0");
  // Six charts, each with a line and the six changes marked on its time axis.
  const history = card(page, "1").locator('[data-field="history"]');
  await history.locator("figure").nth(5).waitFor({ timeout: WAIT });
  expect(await history.locator("svg path").count()).toBe(6);
  expect(await history.locator("svg .mark").count()).toBe(6 * 6);
  expect(await history.locator("figcaption").first().textContent()).toBe("Nodes ready 2");
  await page.screenshot({ path: ".tmp/dashboard-desktop.png", fullPage: true });

  // Phone-sized: nothing wider than the window.
  await page.setViewportSize(PHONE);
  await card(page, "1").waitFor({ timeout: WAIT });
  const overflow = (await page.evaluate(
    "document.documentElement.scrollWidth - window.innerWidth",
  )) as number;
  expect(overflow).toBeLessThanOrEqual(0);
  await page.screenshot({ path: ".tmp/dashboard-phone.png", fullPage: true });
  expect(missing).toEqual([]);
  await page.close();
});

test("a hundred agents: the troubled first, found by search", async () => {
  for (let i = 10; i < 108; i++) hub.put(agent(String(i), 1));
  hub.put(agent("77", 2, { ready: 1 }));
  const page = await browser.page();
  await page.setViewportSize(DESKTOP);
  await page.goto(`${server.url}/login`);
  await page.fill("#token", TOKEN);
  await page.click("button[type=submit]");
  await page.locator('[data-field="summary"]').filter({ hasText: "100 agents" }).waitFor({ timeout: WAIT });
  const first = await page
    .locator("[data-agent]")
    .evaluateAll((els) => els.slice(0, 2).map((e) => e.getAttribute("data-agent")));
  expect(first).toEqual(["1", "77"]);
  await page.fill("#search", "#77");
  await page.locator('[data-field="summary"]').filter({ hasText: "1 agent ·" }).waitFor({ timeout: WAIT });
  expect(await page.locator("[data-agent]").count()).toBe(1);
  await page.fill("#search", "");
  await page.selectOption("#sort", "name");
  // By name: "agent 2", "agent 10", … (numbers as numbers), "prod" (agent 1) last.
  await page.locator('.agents > [data-agent="2"]:first-child + [data-agent="10"]').waitFor({ timeout: WAIT });
  await page.locator('.agents > [data-agent="1"]:last-child').waitFor({ timeout: WAIT });

  // Logging out ends the session: the page is the login page again.
  await page.click("button.logout");
  await page.waitForURL(`${server.url}/login`, { timeout: WAIT });
  const res = await page.request.get(`${server.url}/api/status`);
  expect(res.status()).toBe(401);
  await page.close();
});
