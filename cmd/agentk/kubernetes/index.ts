// The Kubernetes API proxy module: HTTP that kas sends over the tunnel (already authenticated
// by kas), forwarded to the API server with agentk's own credentials.

import { kubeStatus } from "../../common/kubernetes-status.ts";
import type { KubeConfigSource } from "../config/index.ts";
import { createForwarder, type Forwarder, type ForwarderOptions } from "../proxy/forward.ts";
import { kubernetesUpstream } from "./upstream.ts";

export { type KubernetesUpstreamOptions, kubernetesUpstream } from "./upstream.ts";

/** The stream header's `service` that selects this module. */
export const KUBERNETES_SERVICE = "kubernetes";

/** A forwarder to the API server; undefined when agentk has no Kubernetes configuration. */
export async function createKubernetesProxy(
  source: KubeConfigSource,
  options: Omit<ForwarderOptions, "errorBody">,
): Promise<Forwarder | undefined> {
  const upstream = await kubernetesUpstream(source, options.log ? { log: options.log } : {});
  return upstream && createForwarder(upstream, { ...options, errorBody: statusBody });
}

/** Errors the proxy itself answers with, as the `Status` object Kubernetes clients parse. */
export function statusBody(code: number, message: string): { contentType: string; body: string } {
  const reason = code === 502 || code === 503 ? "ServiceUnavailable" : "InternalError";
  return { contentType: "application/json", body: JSON.stringify(kubeStatus(code, message, reason)) };
}
