// agentk composed: the tunnel to kas and the modules that serve the streams kas opens on it.
import { HandshakeError, TunnelClient, type TunnelSession } from "../../lib/tunnel/index.ts";
import type { AgentkConfig } from "./config/index.ts";
import { createKubernetesProxy } from "./kubernetes/index.ts";
import type { AgentkMetrics, Logger, ReadinessChecks } from "./observability/index.ts";
import { createServiceProxies } from "./services/index.ts";
import { createStreamRouter } from "./streams.ts";

/** Handshake headers naming this pod, so kas can say in its logs which replica holds a tunnel. */
export const POD_NAME_HEADER = "x-agentk-pod-name";
export const POD_NAMESPACE_HEADER = "x-agentk-pod-namespace";

export interface AgentDeps {
  log: Logger;
  metrics: AgentkMetrics;
  readiness: ReadinessChecks;
}

export interface Agent {
  readonly client: TunnelClient;
  /** Starts dialing kas; the tunnel is kept up (with backoff) until `stop`. */
  start(): void;
  /** GoAway to kas, in-flight streams get `graceMs` to finish, then everything closes. */
  stop(graceMs?: number): Promise<void>;
}

export async function createAgent(config: AgentkConfig, deps: AgentDeps): Promise<Agent> {
  const { log, metrics, readiness } = deps;
  const perRequest = (route: string) => ({ log, track: () => metrics.requests.start(route) });
  const kubernetes = await createKubernetesProxy(config.kubernetes, perRequest("kubernetes"));
  const services = createServiceProxies(config.services, (name) => perRequest(`service/${name}`));
  const router = createStreamRouter<TunnelSession>({ kubernetes, services }, { log, metrics });

  const client = new TunnelClient({
    url: config.kasAddress,
    dial: {
      headers: {
        ...config.kasHeaders,
        ...(config.pod.name && { [POD_NAME_HEADER]: config.pod.name }),
        ...(config.pod.namespace && { [POD_NAMESPACE_HEADER]: config.pod.namespace }),
        authorization: `Bearer ${config.token.reveal()}`,
      },
      ...(config.caCertFile !== undefined && { caFile: config.caCertFile }),
      ...(config.kasTlsServerName !== undefined && { serverName: config.kasTlsServerName }),
      ...(config.kasInsecureSkipTlsVerify && { insecureSkipTlsVerify: true }),
    },
    tunnel: { keepAliveIntervalMs: config.keepAliveIntervalMs },
    // Never rejects: refusals and handler failures go to the router's log and metrics.
    onStream: (stream, session) => void router.dispatcher.handle(stream, session),
  });
  client.on("connected", (session) => {
    metrics.tunnels.track(session);
    log.info({ kas: config.kasAddress, remote: session.stats.remoteAddress }, "connected to kas");
  });
  client.on("disconnected", (_session, err) => {
    if (err) log.warn({ kas: config.kasAddress, err: err.message }, "tunnel to kas closed");
    else log.info({ kas: config.kasAddress }, "tunnel to kas closed");
  });
  client.on("retry", ({ attempt, delayMs, reason, error }) => {
    const status = error instanceof HandshakeError ? { status: error.status } : {};
    log.warn(
      { kas: config.kasAddress, attempt, delayMs, reason, ...status, err: error.message },
      reason === "dial" ? "cannot reach kas; retrying" : "tunnel to kas ended; reconnecting after a delay",
    );
  });
  readiness.add("tunnel", () => {
    if (!client.active) throw new Error("no tunnel to kas");
  });
  log.info(
    { kubernetes: kubernetes ? config.kubernetes.kind : "none", services: [...services.keys()] },
    kubernetes
      ? "serving the Kubernetes API and allow-listed services"
      : "no Kubernetes configuration; serving allow-listed services only",
  );

  return {
    client,
    start: () => void client.start(),
    async stop(graceMs = 10_000) {
      readiness.add("tunnel", () => {
        throw new Error("shutting down");
      });
      // Both at once: idle HTTP streams close at once, which lets the tunnels finish draining.
      await Promise.all([client.stop(graceMs), router.close(graceMs)]);
    },
  };
}
