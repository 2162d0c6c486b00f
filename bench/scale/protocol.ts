// What the load process (agents.ts) and the runner (main.ts) tell each other, one JSON line each way.
import type { ModuleName } from "./agent-modules.ts";

/** argv[2] of agents.ts. */
export interface AgentsPlan {
  /** kas's agent listener, ws://… */
  url: string;
  /** One token per agent: tunnel i authenticates as agent i. */
  tokens: string[];
  /** Handshakes in flight at once (kas answers 503 beyond its pending-handshake limit). */
  concurrency: number;
  /** yamux keepalive interval of each agent's tunnel (agentk's default unless told otherwise); 0: off. */
  keepAliveIntervalMs: number;
  /**
   * Each agent also opens, as agentk does, a grpc-js channel over `grpc` streams of its tunnel and
   * on it the calls of these modules (agent-modules.ts). Absent or empty: tunnels only.
   */
  modules?: ModuleName[];
  /** How long the report waits for every agent's modules' first exchange with kas. */
  modulesTimeoutMs?: number;
}

/** The load process's stdout line once every tunnel is up (or given up on). */
export interface AgentsReport {
  connected: number;
  failed: number;
  /** First dial error, for the runner's message. */
  error?: string;
  seconds: number;
  /** With modules: agents whose modules all had their first exchange (e.g. a configuration), and the seconds it took for all. */
  configured?: number;
  configuredSeconds?: number;
  /** First module call error, if any. */
  configurationError?: string;
}
