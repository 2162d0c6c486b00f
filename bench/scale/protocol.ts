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
}

/** The load process's stdout line once every tunnel is up (or given up on). */
export interface AgentsReport {
  connected: number;
  failed: number;
  /** First dial error, for the runner's message. */
  error?: string;
  seconds: number;
}
