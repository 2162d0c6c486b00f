// What the runner (main.ts) and the agents' process (agents.ts) say to each other over IPC.
import type { ModuleName } from "../scale/agent-modules.ts";

export interface AgentsPlan {
  /** haproxy frontends for agents, ws://…: agent i dials urls[i % urls.length]. */
  urls: string[];
  tokens: string[];
  /** The first token's place among all the herd's agents (they are split over processes): agent i dials urls[i % urls.length]. */
  firstIndex: number;
  modules: ModuleName[];
  keepAliveIntervalMs: number;
  /** Agents dialed at once while they first come up. */
  concurrency: number;
}

export interface HerdReport {
  /** Agents back on a tunnel with their modules ready, now. */
  up: number;
  /** Agents that lost their tunnel after the mark. */
  lost: number;
  /** For each of them that is back: ms from the mark until its modules were ready again. */
  backMs: number[];
  /** ... until its new tunnel was up. */
  tunnelBackMs: number[];
  /** Lost and not back yet. */
  pending: number;
  /** First exchanges of modules that failed (and were started again). */
  moduleFailures: number;
  firstError?: string;
}

export type AgentsMessage = { up: number } | { report: HerdReport };
