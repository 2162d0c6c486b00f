// Shared by the cluster views tests and bench:views: a cluster in the Kubernetes test server, an
// agent whose configuration turns the views on, and a real EventSource client on kas's API.
import { EventSource } from "eventsource";
import type { ViewEvent } from "../../../modules/cluster_views/views.ts";
import { gitlabJwt } from "../../kas/support/fixtures.ts";
import type { InProcessKas } from "../../kas/support/in-process.ts";
import type { KubeApiServer } from "../../support/kube-apiserver.ts";

export const node = (name: string, ready: boolean) => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name },
  status: {
    capacity: { cpu: "4", memory: "16Gi" },
    allocatable: { cpu: "3500m", memory: "15Gi" },
    conditions: [{ type: "Ready", status: ready ? "True" : "False" }],
  },
});

export const pod = (name: string, phase = "Running", restarts = 0) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name },
  spec: { containers: [{ name: "app", image: "app:1" }] },
  status: { phase, containerStatuses: [{ name: "app", restartCount: restarts, ready: phase === "Running" }] },
});

/** Two nodes (both Ready), a namespace `apps` with two running pods and a Deployment. */
export function seedCluster(kube: KubeApiServer): void {
  const { store } = kube;
  store.create("nodes", undefined, node("node-a", true));
  store.create("nodes", undefined, node("node-b", true));
  store.create("namespaces", undefined, { apiVersion: "v1", kind: "Namespace", metadata: { name: "apps" } });
  for (const name of ["web-1", "web-2"]) store.create("pods", "apps", pod(name));
  store.create("deployments", "apps", {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "web" },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: "web" } },
      template: {
        metadata: { labels: { app: "web" } },
        spec: { containers: [{ name: "app", image: "app:1" }] },
      },
    },
  });
  kube.setDeploymentReady("apps", "web", true);
}

/** Sets a node's Ready condition, as its kubelet would. */
export function setNodeReady(kube: KubeApiServer, name: string, ready: boolean): void {
  const current = kube.store.get("nodes", undefined, name);
  kube.store.update("nodes", undefined, name, {
    status: {
      ...(current.status as object),
      conditions: [{ type: "Ready", status: ready ? "True" : "False" }],
    },
  });
}

export interface EventsClient {
  events: ViewEvent[];
  opened: Promise<void>;
  close(): void;
}

/** A real EventSource (WHATWG) on `path` of kas's API, with GitLab's JWT; collects every event. */
export function eventsOf(kas: InProcessKas, path: string, onEvent?: (e: ViewEvent) => void): EventsClient {
  const events: ViewEvent[] = [];
  const source = new EventSource(`${kas.addresses.api}${path}`, {
    fetch: async (input, init) =>
      fetch(input, {
        ...init,
        headers: { ...init.headers, "gitlab-kas-api-request": await gitlabJwt(kas.apiSecret) },
      }),
  });
  const opened = new Promise<void>((resolve, reject) => {
    source.onopen = () => resolve();
    source.onerror = (err) => reject(err);
  });
  for (const type of ["snapshot", "change", "connected", "disconnected"]) {
    source.addEventListener(type, (m) => {
      const event = JSON.parse(m.data) as ViewEvent;
      events.push(event);
      onEvent?.(event);
    });
  }
  return { events, opened, close: () => source.close() };
}

export const viewsConfig = (extra = "") => `cluster_views: {${extra}}\n`;
