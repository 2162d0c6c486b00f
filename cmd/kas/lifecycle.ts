// kas's lifecycle: start (the parts in order, then the modules), drain (not ready, GoAway to every
// tunnel) and stop (the modules get the grace period, then the router, then the parts). It holds
// what a running kas is made of; a failed start stops whatever it had started.
import type { StatusStore } from "../../modules/agent_configuration/kas/status-store.ts";
import type { AgentTracker } from "../../modules/agent_tracker/kas/tracker.ts";
import type { ViewsHub } from "../../modules/cluster_views/views.ts";
import type { GitopsStatusStore } from "../../modules/gitops/kas/status-store.ts";
import type { KasModuleDeps, ModuleRunner } from "../../modules/runtime/index.ts";
import type { AgentListener } from "./agents/index.ts";
import type { KasConfig } from "./config/index.ts";
import type { ReadinessChecks } from "./observability/index.ts";
import { closeKasParts, type KasParts } from "./parts.ts";

/** What modules hand back once they run (the daemon's getters, and modules that follow others). */
export interface KasPublished {
  agents?: AgentListener;
  tracker?: AgentTracker;
  /** The cluster views module's hub, once built (ActionCable and the dashboard follow it). */
  views?: ViewsHub;
  /** Agent configuration's and GitOps' status stores, once built (the dashboard shows them). */
  configurationStatus?: StatusStore;
  gitopsStatus?: GitopsStatusStore;
}

/** A started kas. */
export interface KasRunning {
  parts: KasParts;
  runner: ModuleRunner<KasModuleDeps>;
  published: KasPublished;
}

export interface KasLifecycleOptions {
  config: Pick<KasConfig, "shutdownGracePeriodMs" | "shutdownDrainDelayMs">;
  readiness: ReadinessChecks;
  /** Builds the shared dependencies (closing what it opened if it fails). */
  open(): Promise<KasParts>;
  /** The modules' runner and what they are built from, over the parts. */
  compose(
    parts: KasParts,
    published: KasPublished,
  ): { runner: ModuleRunner<KasModuleDeps>; deps: KasModuleDeps };
}

export class KasLifecycle {
  readonly #o: KasLifecycleOptions;
  #running: KasRunning | undefined;
  #stopping: Promise<void> | undefined;

  constructor(options: KasLifecycleOptions) {
    this.#o = options;
  }

  /** Set once started (and kept after a stop). */
  get running(): KasRunning | undefined {
    return this.#running;
  }

  /** Builds and starts every module; on failure, whatever started is stopped again. */
  async start(): Promise<KasRunning> {
    // Not ready until every module runs: the observability listener (and /readiness) opens with the
    // parts, before the fronts listen; a load balancer must not send traffic to a half-started kas.
    const starting = this.#o.readiness.add("start", () => {
      throw new Error("starting");
    });
    let parts: KasParts;
    try {
      parts = await this.#o.open();
    } catch (err) {
      this.#stopping = Promise.resolve(this.drain());
      throw err;
    }
    let runner: ModuleRunner<KasModuleDeps> | undefined;
    try {
      const published: KasPublished = {};
      const composed = this.#o.compose(parts, published);
      runner = composed.runner;
      this.#running = { parts, runner, published };
      await runner.start(composed.deps);
      starting();
      return this.#running;
    } catch (err) {
      this.#stopping = this.#stop(parts, runner, 0).catch(() => {});
      await this.#stopping;
      throw err;
    }
  }

  /** Not ready any more; every tunnel gets GoAway (agents move while the rest drains). */
  drain(): void {
    this.#notReady();
    this.#running?.parts.router.drain();
  }

  #notReady(): void {
    this.#o.readiness.add("shutdown", () => {
      throw new Error("shutting down");
    });
  }

  /** Graceful stop, once: see KasServer.close. */
  close(graceMs = this.#o.config.shutdownGracePeriodMs): Promise<void> {
    this.#stopping ??= this.#running
      ? this.#stop(this.#running.parts, this.#running.runner, graceMs)
      : Promise.resolve(this.drain());
    return this.#stopping;
  }

  async #stop(
    parts: KasParts,
    runner: ModuleRunner<KasModuleDeps> | undefined,
    graceMs: number,
  ): Promise<void> {
    // Tunnels get GoAway at once (agents move while the rest drains; their entries leave Redis
    // as they do) and so do peers' tunnels to the private API; the fronts keep serving, with
    // `Connection: close`, for the drain delay, until load balancers have seen the readiness
    // failure, then finish what is in flight. Routing (forwarding, waiting for an agent's new
    // tunnel) serves them to the end, so the router closes last.
    const deadline = Date.now() + graceMs;
    const delayMs = Math.min(this.#o.config.shutdownDrainDelayMs, graceMs / 2);
    this.#notReady();
    parts.router.drain();
    try {
      await runner?.close(graceMs, delayMs);
    } finally {
      await parts.router.close(Math.max(0, deadline - Date.now()));
    }
    await closeKasParts(parts);
  }
}
