// HTTP that kas sends over the tunnel (already authenticated by kas), forwarded to the API
// server with agentk's own credentials.

import { createForwarder, type Forwarder, type ForwarderOptions } from "../../../tool/http/proxy/index.ts";
import { kubeStatus } from "../../../tool/kubernetes-status.ts";
import type { KubeConfigSource } from "./kube-config-source.ts";
import { kubernetesUpstream } from "./upstream.ts";

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
