// What the load process (agents.ts) and the runner (main.ts) tell each other, one JSON line each way.

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
   * Each agent also opens, as agentk does, a grpc-js channel over a `grpc` stream on its tunnel and
   * a GetConfiguration stream on it (bench:config). The report then waits for every agent's first
   * configuration, up to this many ms. Absent: tunnels only.
   */
  configurationStreamsTimeoutMs?: number;
}

/** The load process's stdout line once every tunnel is up (or given up on). */
export interface AgentsReport {
  connected: number;
  failed: number;
  /** First dial error, for the runner's message. */
  error?: string;
  seconds: number;
  /** With configuration streams: agents whose first configuration arrived, and the seconds it took for all. */
  configured?: number;
  configuredSeconds?: number;
  /** First GetConfiguration error, if any. */
  configurationError?: string;
}
