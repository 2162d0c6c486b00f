// The demo's live dashboard: kas's settings for it (a loopback listener, a login token), a small
// cluster in the Kubernetes API test server (nodes, a shop namespace with two Deployments and their
// pods), and a change every few seconds (a Deployment scaled, a node NotReady and back, a Warning
// event) so that the page moves. Only ever applied to the stand-in, never to a real cluster.
import { randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { KubeStore } from "../test/support/kube-apiserver.ts";

export const DASHBOARD_NAMESPACE = "shop";
const NODES = ["node-1", "node-2", "node-3"];
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

/** Three Ready nodes, and the shop: Deployments cart (3) and api (2), all ready, their pods Running. */
export function seedCluster(store: KubeStore): void {
  for (const name of NODES) store.create("nodes", undefined, node(name, true));
  store.create("namespaces", undefined, { metadata: { name: DASHBOARD_NAMESPACE } });
  for (const [name, replicas] of [
    [CART, 3],
    ["api", 2],
  ] as const) {
    store.create("deployments", DASHBOARD_NAMESPACE, deployment(name, replicas));
    store.setDeploymentStatus(DASHBOARD_NAMESPACE, name, true);
    for (let i = 0; i < replicas; i++) addPod(store, name, i);
  }
}

/** The changes, in a loop: each makes one thing on the page move, and says what. */
const STEPS: Array<(store: KubeStore) => string> = [
  (store) => {
    scale(store, 5);
    store.setDeploymentStatus(DASHBOARD_NAMESPACE, CART, 3);
    for (const i of [3, 4]) addPod(store, CART, i, "Pending");
    return `Deployment ${DASHBOARD_NAMESPACE}/${CART} scaled 3 -> 5 (3 ready: rolling out)`;
  },
  (store) => {
    store.setDeploymentStatus(DASHBOARD_NAMESPACE, CART, true);
    for (const i of [3, 4])
      store.update("pods", DASHBOARD_NAMESPACE, `${CART}-${i}`, { status: { phase: "Running" } });
    return `Deployment ${DASHBOARD_NAMESPACE}/${CART}: 5/5 ready (rollout complete)`;
  },
  (store) => {
    store.update("nodes", undefined, "node-2", { status: node("node-2", false).status });
    return "node node-2 went NotReady";
  },
  (store) => {
    const now = new Date().toISOString();
    store.create("events", DASHBOARD_NAMESPACE, {
      metadata: { generateName: `${CART}-1.` },
      type: "Warning",
      reason: "BackOff",
      message: "Back-off restarting failed container cart in pod cart-1",
      involvedObject: { kind: "Pod", namespace: DASHBOARD_NAMESPACE, name: `${CART}-1` },
      count: 1,
      firstTimestamp: now,
      lastTimestamp: now,
    });
    return `a Warning event: BackOff of pod ${DASHBOARD_NAMESPACE}/${CART}-1`;
  },
  (store) => {
    store.update("nodes", undefined, "node-2", { status: node("node-2", true).status });
    return "node node-2 is Ready again";
  },
  (store) => {
    scale(store, 3);
    store.setDeploymentStatus(DASHBOARD_NAMESPACE, CART, true);
    for (const i of [3, 4]) store.delete("pods", DASHBOARD_NAMESPACE, `${CART}-${i}`);
    return `Deployment ${DASHBOARD_NAMESPACE}/${CART} scaled back 5 -> 3`;
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

function scale(store: KubeStore, replicas: number): void {
  const current = store.get("deployments", DASHBOARD_NAMESPACE, CART);
  store.update("deployments", DASHBOARD_NAMESPACE, CART, { spec: { ...(current.spec as object), replicas } });
}

function node(name: string, ready: boolean) {
  const resources = { cpu: "4", memory: "16Gi", pods: "110" };
  const now = new Date().toISOString();
  return {
    metadata: { name, labels: { "kubernetes.io/hostname": name } },
    status: {
      capacity: resources,
      allocatable: { ...resources, memory: "15Gi" },
      conditions: [
        {
          type: "Ready",
          status: ready ? "True" : "False",
          reason: ready ? "KubeletReady" : "KubeletNotReady",
          message: ready ? "kubelet is posting ready status" : "container runtime is down",
          lastHeartbeatTime: now,
          lastTransitionTime: now,
        },
      ],
    },
  };
}

function deployment(name: string, replicas: number) {
  const labels = { app: name };
  return {
    metadata: { name, labels },
    spec: {
      replicas,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: { containers: [{ name, image: `registry.example.com/${name}:1` }] },
      },
    },
  };
}

function addPod(store: KubeStore, app: string, i: number, phase = "Running"): void {
  store.create("pods", DASHBOARD_NAMESPACE, {
    metadata: { name: `${app}-${i}`, labels: { app } },
    spec: {
      nodeName: NODES[i % NODES.length],
      containers: [{ name: app, image: `registry.example.com/${app}:1` }],
    },
    status: { phase, containerStatuses: [{ name: app, ready: phase === "Running", restartCount: 0 }] },
  });
}
