import { setTimeout as delay } from "node:timers/promises";
import type { Module, ModuleFactory, Phase } from "./module.ts";

interface Built {
  module: Module;
  phase: Phase;
}

/** Thrown by `stop` once every module was closed, when some of them failed to: `errors` name each. */
export class ModuleCloseError extends AggregateError {
  override name = "ModuleCloseError";
}

/**
 * Runs a daemon's modules: builds all of them first (so every route, stream kind and gRPC service
 * is registered before any listener accepts), starts them phase by phase, and stops them in
 * reverse: every module is told to drain and its signal aborts (nothing takes new work), then
 * each phase, from the last, gets what is left of one shared grace period to finish.
 */
export class ModuleRunner<Deps> {
  readonly #factories: readonly ModuleFactory<Deps>[];
  readonly #stop = new AbortController();
  /** Every module built so far: each gets its close(), started or not. */
  #built: Built[] = [];
  #stopping: Promise<void> | undefined;

  constructor(factories: readonly ModuleFactory<Deps>[]) {
    const names = new Set<string>();
    for (const f of factories) {
      if (names.has(f.name)) throw new Error(`module ${f.name} is listed twice`);
      names.add(f.name);
    }
    this.#factories = factories;
  }

  /** Where the started modules' listeners are, by listener name. */
  get urls(): Partial<Record<string, string>> {
    return Object.assign({}, ...this.#built.map((b) => b.module.urls ?? {}));
  }

  /** Module names in start order. */
  get order(): string[] {
    return ordered(this.#factories.map((f) => ({ name: f.name, phase: f.phase }))).map((f) => f.name);
  }

  /** Builds and starts every module; on failure, whatever started is stopped at once and the error rethrown. */
  async start(deps: Deps): Promise<void> {
    if (this.#stop.signal.aborted) throw new Error("modules already closed");
    const built = this.#built;
    try {
      for (const f of this.#factories) built.push({ module: await f.create(deps), phase: f.phase });
      for (const phase of phasesOf(built, "up")) {
        const now = built.filter((b) => b.phase === phase);
        await Promise.all(now.map((b) => b.module.start?.(this.#stop.signal)));
        if (this.#stop.signal.aborted) throw new Error("stopped while starting");
      }
    } catch (err) {
      await this.close(0).catch(() => {}); // the start failure is the one to report
      throw err;
    }
  }

  /**
   * Graceful stop: no module takes new work, then the phases close in reverse order, all within
   * `graceMs`. A module that fails to close does not stop the others: once all are done, stop
   * rejects with a {@link ModuleCloseError} naming each failure. Idempotent.
   */
  close(graceMs: number, drainDelayMs = 0): Promise<void> {
    this.#stopping ??= this.#stopAll(graceMs, drainDelayMs);
    return this.#stopping;
  }

  /**
   * `drainDelayMs` (within `graceMs`) separates the drain from the closes: modules have been told
   * to drain but still serve (fronts keep accepting while load balancers take this process out).
   */
  async #stopAll(graceMs: number, drainDelayMs: number): Promise<void> {
    const failures: Error[] = [];
    const failed = (module: string, step: string) => (cause: unknown) => {
      failures.push(new Error(`module ${module} failed to ${step}`, { cause }));
    };
    this.#stop.abort(new Error("stopping"));
    for (const phase of phasesOf(this.#built, "down")) {
      for (const b of this.#built) {
        if (b.phase !== phase) continue;
        try {
          b.module.drain?.();
        } catch (err) {
          failed(b.module.name, "drain")(err);
        }
      }
    }
    const deadline = Date.now() + graceMs;
    if (drainDelayMs > 0) await delay(Math.min(drainDelayMs, graceMs));
    for (const phase of phasesOf(this.#built, "down")) {
      const left = Math.max(0, deadline - Date.now());
      await Promise.all(
        this.#built
          .filter((b) => b.phase === phase)
          .map((b) => closeWithin(b.module, left).catch(failed(b.module.name, "close"))),
      );
    }
    if (failures.length > 0) throw new ModuleCloseError(failures, failures.map((f) => f.message).join("; "));
  }
}

/**
 * How long past its share of the grace a module's close may take before the stop goes on without
 * it: a close that never settles must not keep the process from exiting.
 */
const CLOSE_OVERRUN_MS = 2000;

/** `module.close(graceMs)`, rejected once it overruns its grace by {@link CLOSE_OVERRUN_MS}. */
async function closeWithin(module: Module, graceMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const overrun = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`did not close within ${graceMs + CLOSE_OVERRUN_MS} ms`)),
      graceMs + CLOSE_OVERRUN_MS,
    );
  });
  try {
    await Promise.race([attempt(() => module.close?.(graceMs)), overrun]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs `fn`; a synchronous throw becomes a rejection. */
function attempt<T>(fn: () => T | Promise<T>): Promise<T> {
  return new Promise<T>((resolve) => resolve(fn()));
}

/** The phases present, in start ("up") or stop ("down") order. */
function phasesOf(built: readonly Built[], direction: "up" | "down"): Phase[] {
  const phases = [...new Set(built.map((b) => b.phase))].sort((a, b) => a - b);
  return direction === "up" ? phases : phases.reverse();
}

/** Stable by phase: list order within a phase. */
function ordered<T extends { phase: Phase }>(items: T[]): T[] {
  return items
    .map((item, i) => ({ item, i }))
    .sort((a, b) => a.item.phase - b.item.phase || a.i - b.i)
    .map((x) => x.item);
}
