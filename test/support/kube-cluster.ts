// A small cluster in the Kubernetes API test server's store, and the changes a cluster goes
// through (a Deployment scaled and rolled out, a node NotReady, pods coming and going), written as
// the controllers and kubelets would: for the cluster views' tests and the demo's dashboard.
import type { KubeStore } from "./kube-apiserver.ts";

export const NODES = ["node-1", "node-2", "node-3"];

/** Three Ready nodes (4 CPU, 16 GiB each), and in `ns` Deployments `apps` (name -> replicas), all ready, their pods Running. */
export function seedCluster(store: KubeStore, ns: string, apps: Record<string, number>): void {
  for (const name of NODES) store.create("nodes", undefined, node(name, true));
  store.create("namespaces", undefined, { metadata: { name: ns } });
  for (const [name, replicas] of Object.entries(apps)) {
    store.create("deployments", ns, deployment(name, replicas));
    store.setDeploymentStatus(ns, name, true);
    for (let i = 0; i < replicas; i++) addPod(store, ns, name, i);
  }
}

/** The Deployment's spec.replicas set, as `kubectl scale` would (its status is the controller's: setDeploymentStatus). */
export function scaleDeployment(store: KubeStore, ns: string, name: string, replicas: number): void {
  const current = store.get("deployments", ns, name);
  store.update("deployments", ns, name, { spec: { ...(current.spec as object), replicas } });
}

/** The node's Ready condition, as its kubelet (or the node controller) reports it. */
export function setNodeReady(store: KubeStore, name: string, ready: boolean): void {
  store.update("nodes", undefined, name, { status: node(name, ready).status });
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

export function addPod(store: KubeStore, ns: string, app: string, i: number, phase = "Running"): void {
  store.create("pods", ns, {
    metadata: { name: `${app}-${i}`, labels: { app } },
    spec: {
      nodeName: NODES[i % NODES.length],
      containers: [{ name: app, image: `registry.example.com/${app}:1` }],
    },
    status: { phase, containerStatuses: [{ name: app, ready: phase === "Running", restartCount: 0 }] },
  });
}
