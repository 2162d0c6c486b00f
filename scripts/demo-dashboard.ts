// The demo's live dashboard: kas's settings for it (a loopback listener, a login token), a small
// cluster in the Kubernetes API test server (nodes, a shop namespace with two Deployments and their
// pods), and a change every few seconds (a Deployment scaled, a node NotReady and back, a pod
// crash-looping with the kubelet's Warning about it, then recovered) so that the page moves. Only ever applied to the stand-in, never to a real cluster.
import { randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { KubeStore } from "../test/support/kube-apiserver.ts";
import {
  addPod,
  addWarningEvent,
  scaleDeployment,
  seedCluster,
  setNodeReady,
  setPodCrashLooping,
  setPodRunning,
} from "../test/support/kube-cluster.ts";

const NS = "shop";

/** The agent configuration's section that turns agentk's cluster views on (every view, every namespace). */
export const clusterViewsConfigYaml = "cluster_views: {}\n";
const CART = "cart";

/** Writes the dashboard's token file in `dir`; kas's environment for a loopback dashboard. */
export async function dashboardSettings(
  dir: string,
): Promise<{ token: string; env: Record<string, string> }> {
  const token = randomBytes(18).toString("base64url");
  const tokenFile = join(dir, "dashboard_token");
  await writeFile(tokenFile, token);
  return {
    token,
    env: { KAS_DASHBOARD_LISTEN_ADDRESS: "127.0.0.1:0", KAS_DASHBOARD_TOKEN_FILE: tokenFile },
  };
}

/** Three Ready nodes; in `shop`, Deployments cart (3) and api (2), ready. */
export function seedDemoCluster(store: KubeStore): void {
  seedCluster(store, NS, { [CART]: 3, api: 2 });
}

/** Restarts of the crash-looping pod's container so far (they only ever grow, as a kubelet counts them). */
let restarts = 0;

/** The changes, in a loop: each makes one thing on the page move, and says what. */
const STEPS: Array<(store: KubeStore) => string> = [
  (store) => {
    scaleDeployment(store, NS, CART, 5);
    store.setDeploymentStatus(NS, CART, 3);
    for (const i of [3, 4]) addPod(store, NS, CART, i, "Pending");
    return `Deployment ${NS}/${CART} scaled 3 -> 5 (3 ready: rolling out)`;
  },
  (store) => {
    store.setDeploymentStatus(NS, CART, true);
    for (const i of [3, 4]) store.update("pods", NS, `${CART}-${i}`, { status: { phase: "Running" } });
    return `Deployment ${NS}/${CART}: 5/5 ready (rollout complete)`;
  },
  (store) => {
    setNodeReady(store, "node-2", false);
    return "node node-2 went NotReady";
  },
  (store) => {
    // As a kubelet: the container restarted and waits in CrashLoopBackOff, and says so in a Warning.
    restarts += 3;
    setPodCrashLooping(store, NS, `${CART}-1`, restarts);
    addWarningEvent(
      store,
      NS,
      { kind: "Pod", name: `${CART}-1` },
      "BackOff",
      `Back-off restarting failed container ${CART} in pod ${CART}-1`,
    );
    return `pod ${NS}/${CART}-1 crash-looping (${restarts} restarts), a Warning event: BackOff`;
  },
  (store) => {
    setNodeReady(store, "node-2", true);
    setPodRunning(store, NS, `${CART}-1`);
    return `node node-2 is Ready again, pod ${NS}/${CART}-1 running again`;
  },
  (store) => {
    scaleDeployment(store, NS, CART, 3);
    store.setDeploymentStatus(NS, CART, true);
    for (const i of [3, 4]) store.delete("pods", NS, `${CART}-${i}`);
    return `Deployment ${NS}/${CART} scaled back 5 -> 3`;
  },
];

/** Makes one change every `everyMs` until the returned function is called; `say` is told each. */
export function changeClusterEvery(
  store: KubeStore,
  everyMs: number,
  say: (what: string) => void,
): () => void {
  let step = 0;
  const timer = setInterval(() => {
    try {
      say(STEPS[step % STEPS.length]!(store));
    } catch (err) {
      say(`change failed: ${(err as Error).message}`);
    }
    step++;
  }, everyMs);
  return () => clearInterval(timer);
}
