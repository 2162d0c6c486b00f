// The seam every capability plugs into, in either daemon: a factory builds a module from the
// daemon's shared dependencies; the runner starts modules by phase and stops them in reverse.

/** One capability's half in one daemon (its kas half or its agentk half). */
export interface Module {
  readonly name: string;
  /** Once started: where its listeners ended up, by name (ports may be ephemeral). */
  readonly urls?: Readonly<Partial<Record<string, string>>>;
  /**
   * Starts the module's work and resolves once it serves (listeners bound, loops running). What it
   * starts runs until `signal` aborts; from then on the module takes no new work (a listener stops
   * accepting, a loop stops polling).
   */
  start?(signal: AbortSignal): Promise<void> | void;
  /**
   * The daemon is stopping: take no new work from now on (stop accepting, tell peers to go
   * elsewhere) without waiting for work in flight. Every module is told at once, before any
   * closes, so the grace periods run side by side.
   */
  drain?(): void;
  /**
   * Called after `drain` and `signal` aborted: lets work in flight finish for at most `graceMs`, then releases
   * everything (0: at once). Resolves when nothing of the module is left.
   */
  close?(graceMs: number): Promise<void>;
}

/**
 * Start order. Modules of a phase start together once every earlier phase has started, and stop
 * in the reverse order: what others lean on (observability, the agent listener) is up first and
 * down last; the fronts that take requests from outside come up last and go down first.
 */
export const Phase = {
  /** Probes and metrics: up before anything can fail, down last. */
  observability: 0,
  /** What modules lean on: the agent listener, the tunnel to kas. */
  core: 10,
  /** Capabilities: register their routes, stream kinds and services; run their loops. */
  capability: 20,
  /** Listeners for clients from outside (GitLab's API, the Kubernetes API proxy). */
  front: 30,
} as const;
export type Phase = (typeof Phase)[keyof typeof Phase];

/** Builds a module from `Deps`, the daemon's shared dependencies (log, metrics, readiness, …). */
export interface ModuleFactory<Deps> {
  readonly name: string;
  readonly phase: Phase;
  create(deps: Deps): Module | Promise<Module>;
}
