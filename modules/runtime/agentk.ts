// What agentk gives its modules: the shared dependencies an agentk module is built from.
import type { EventEmitter } from "node:events";
import type * as grpc from "@grpc/grpc-js";
import type { Registry } from "prom-client";
import type { TunnelClient } from "../../lib/tunnel/index.ts";
import type { Forwarder } from "../../tool/http/proxy/index.ts";
import type { Logger, ReadinessChecks, RequestMetrics } from "../../tool/observability/index.ts";
import type { AgentConfiguration } from "../agentcfg/index.ts";
import type { LatestValue } from "./latest.ts";
import type { ModuleFactory } from "./module.ts";

/**
 * The services kas reaches over `KIND_HTTP` streams, by the name in the stream header (the
 * Kubernetes API as `kubernetes`, allow-listed in-cluster services by their names).
 */
export interface HttpServices {
  /** Serves `name` with `forwarder`; agentk closes it on shutdown. */
  add(name: string, forwarder: Forwarder): void;
  /** `name` is known but cannot be served here: its streams are refused as UNAVAILABLE with `reason`. */
  unavailable(name: string, reason: string): void;
}

/** Whether this replica leads among the agent's replicas, and when that changes (see `leaderOnly`). */
export interface LeaderElection extends EventEmitter<{ elected: []; lost: [] }> {
  readonly leading: boolean;
}

/** The agent's configuration as kas sends it: the validated .gitlab/agents/<name>/config.yaml. */
export type { AgentConfiguration } from "../agentcfg/index.ts";

/** What every agentk module is built from. */
export interface AgentkModuleDeps {
  log: Logger;
  /** Where modules register their metrics. */
  registry: Registry;
  /** agentk_request_duration_seconds{route,status}, for modules that serve requests. */
  requests: RequestMetrics;
  readiness: ReadinessChecks;
  /** The tunnel to kas (kept up, with backoff): streams toward kas open on its active tunnel. */
  kas: TunnelClient;
  httpServices: HttpServices;
  /**
   * A gRPC channel to kas over the tunnel (a `grpc` stream on the active tunnel): modules make
   * their clients with `{ channelOverride: kasRpc }`. kas knows who calls from the tunnel.
   */
  kasRpc: grpc.Channel;
  /**
   * This replica's leader election among the agent's replicas, when a module asked for it
   * (`leaderOnly`) and agentk has a Kubernetes configuration.
   */
  leader?: LeaderElection;
  /** The newest agent configuration from kas, as it changes. */
  configuration: LatestValue<AgentConfiguration>;
}

export type AgentkModuleFactory = ModuleFactory<AgentkModuleDeps>;
