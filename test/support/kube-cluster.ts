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

/** The pod's container crash-looping, as its kubelet reports it: waiting in CrashLoopBackOff after `restarts` restarts. */
export function setPodCrashLooping(store: KubeStore, ns: string, name: string, restarts: number): void {
  const current = store.get("pods", ns, name);
  const container = (current.spec as { containers: { name: string }[] }).containers[0]!.name;
  store.update("pods", ns, name, {
    status: {
      phase: "Running",
      containerStatuses: [
        {
          name: container,
          ready: false,
          restartCount: restarts,
          state: {
            waiting: {
              reason: "CrashLoopBackOff",
              message: `back-off restarting failed container ${container}`,
            },
          },
          lastState: { terminated: { reason: "Error", exitCode: 1 } },
        },
      ],
    },
  });
}

/** The pod's container running and ready again, its restarts kept (a kubelet never lowers them). */
export function setPodRunning(store: KubeStore, ns: string, name: string): void {
  const current = store.get("pods", ns, name);
  const status = current.status as { containerStatuses?: { name: string; restartCount?: number }[] };
  const [c] = status.containerStatuses ?? [];
  const container = (current.spec as { containers: { name: string }[] }).containers[0]!.name;
  store.update("pods", ns, name, {
    status: {
      phase: "Running",
      containerStatuses: [
        {
          name: c?.name ?? container,
          ready: true,
          restartCount: c?.restartCount ?? 0,
          state: { running: {} },
        },
      ],
    },
  });
}

/** A Warning event about an object, as a controller or kubelet records it (core/v1 Event). */
export function addWarningEvent(
  store: KubeStore,
  ns: string,
  involved: { kind: string; name: string },
  reason: string,
  message: string,
  count = 1,
): void {
  const now = new Date().toISOString();
  store.create("events", ns, {
    metadata: {
      name: `${involved.name}.${Date.now().toString(16)}${Math.random().toString(16).slice(2, 6)}`,
    },
    involvedObject: { ...involved, namespace: ns },
    type: "Warning",
    reason,
    message,
    count,
    firstTimestamp: now,
    lastTimestamp: now,
    source: { component: "kubelet" },
  });
}

/** The Deployment's controller gave up: Progressing False with ProgressDeadlineExceeded (`ready` of its replicas ready). */
export function setDeploymentStuck(store: KubeStore, ns: string, name: string, ready: number): void {
  const current = store.get("deployments", ns, name);
  const replicas = (current.spec as { replicas?: number }).replicas ?? 1;
  const now = new Date().toISOString();
  store.update("deployments", ns, name, {
    status: {
      observedGeneration: current.metadata.generation ?? 1,
      replicas,
      updatedReplicas: replicas,
      readyReplicas: ready,
      availableReplicas: ready,
      unavailableReplicas: replicas - ready,
      conditions: [
        {
          type: "Available",
          status: "False",
          reason: "MinimumReplicasUnavailable",
          message: "Deployment does not have minimum availability.",
          lastUpdateTime: now,
          lastTransitionTime: now,
        },
        {
          type: "Progressing",
          status: "False",
          reason: "ProgressDeadlineExceeded",
          message: `ReplicaSet "${name}-7d4b9c" has timed out progressing.`,
          lastUpdateTime: now,
          lastTransitionTime: now,
        },
      ],
    },
  });
}
