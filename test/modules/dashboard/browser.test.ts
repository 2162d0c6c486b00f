// The dashboard page in a real headless Chromium (Debian's, driven by playwright-core): the login
// form, then the page following the views hub live. Events come from an in-memory hub here; the
// whole chain (Kubernetes test server -> agentk -> kas -> page) is in test/e2e/dashboard.test.ts.
import { mkdir } from "node:fs/promises";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { AgentViews, Rollout } from "../../../modules/cluster_views/views.ts";
import { bundleDashboard } from "../../../modules/dashboard/kas/assets.ts";
import { type DashboardServer, serveDashboard } from "../../../modules/dashboard/kas/server.ts";
import { Chromium } from "../../support/chromium.ts";
import { MemoryViewsHub } from "../../support/memory-views-hub.ts";

const TOKEN = "browser-test-dashboard-token";
const WAIT = 10_000;
const quiet = { error: () => {}, debug: () => {}, info: () => {} };

const rollout = (name: string, updated: number, state: Rollout["state"]): Rollout => ({
  kind: "Deployment",
  namespace: "shop",
  name,
  desired: 5,
  updated,
  ready: updated,
  available: updated,
  state,
});

function agent(agentId: string, seq: number, ready: number, rollouts: Rollout[]): AgentViews {
  const res = { cpuMillis: 8000, memoryBytes: 32 * 2 ** 30 };
  return {
    agentId,
    connected: true,
    seq,
    updatedAt: new Date().toISOString(),
    views: {
      nodes: { total: 3, ready, capacity: res, allocatable: res },
      pods: {
        namespaces: {
          shop: { phases: { Pending: 1, Running: 11, Succeeded: 0, Failed: 0, Unknown: 0 }, restarts: 2 },
        },
      },
      workloads: { rollouts, total: 4 },
      warnings: {
        latest: [
          {
            namespace: "shop",
            object: "Pod/cart-5d9f",
            reason: "BackOff",
            message: "Back-off restarting failed container",
            count: 3,
            lastSeen: new Date().toISOString(),
          },
        ],
      },
    },
  };
}

let hub: MemoryViewsHub;
let server: DashboardServer;
let browser: Chromium;
beforeAll(async () => {
  hub = new MemoryViewsHub();
  hub.put(agent("1", 1, 3, [rollout("cart", 2, "progressing")]));
  hub.put(agent("2", 1, 1, []));
  [server, browser] = await Promise.all([
    serveDashboard({
      listen: { address: { host: "127.0.0.1", port: 0 } },
      token: TOKEN,
      sessionTtlMs: 60_000,
      hub,
      assets: await bundleDashboard(),
      log: quiet,
    }),
    Chromium.launch(),
  ]);
});
afterAll(async () => {
  await browser?.close();
  await server?.close(1000);
});

const field = (page: Page, agentId: string, name: string) =>
  page.locator(`[data-agent="${agentId}"] [data-field="${name}"]`);
/** Waits, up to WAIT, for the field to show `text`. */
const shows = (page: Page, agentId: string, name: string, text: string) =>
  field(page, agentId, name).filter({ hasText: text }).waitFor({ timeout: WAIT });

test("a wrong token stays on the login page; the right one opens the live page", async () => {
  const page = await browser.page();
  await page.goto(server.url);
  expect(new URL(page.url()).pathname).toBe("/login");
  await page.fill("#token", "not-the-token");
  await page.click("button[type=submit]");
  await page.getByRole("alert").filter({ hasText: "Wrong token" }).waitFor({ timeout: WAIT });
  expect(await page.locator("#app").count()).toBe(0);

  await page.fill("#token", TOKEN);
  await page.click("button[type=submit]");
  await page.waitForURL(`${server.url}/`, { timeout: WAIT });
  await page.locator('[data-field="link"]').filter({ hasText: "live" }).waitFor({ timeout: WAIT });
  await shows(page, "1", "nodes-ready", "3/3");
  await shows(page, "1", "rollouts", "Deployment shop/cart");
  await shows(page, "1", "warnings", "BackOff");
  await shows(page, "2", "nodes-ready", "1/3");
  expect(await field(page, "1", "pods").textContent()).toBe("12");

  // A node goes NotReady, the rollout completes, then the agent disconnects: the page follows.
  hub.put(agent("1", 2, 2, [rollout("cart", 5, "complete")]));
  await shows(page, "1", "nodes-ready", "2/3");
  await shows(page, "1", "rollouts", "none");
  hub.presence("1", false);
  await shows(page, "1", "status", "disconnected");
  expect(await field(page, "2", "status").textContent()).toBe("connected");
  // An older update arriving late changes nothing.
  hub.put(agent("1", 1, 0, []));
  hub.put(agent("2", 2, 3, []));
  await shows(page, "2", "nodes-ready", "3/3");
  expect(await field(page, "1", "nodes-ready").textContent()).toBe("2/3");

  await mkdir(".tmp", { recursive: true });
  await page.screenshot({ path: ".tmp/dashboard-hub.png", fullPage: true });

  // Logging out ends the session: the page is the login page again.
  await page.click("button.logout");
  await page.waitForURL(`${server.url}/login`, { timeout: WAIT });
  const res = await page.request.get(`${server.url}/api/agents`);
  expect(res.status()).toBe(401);
});
