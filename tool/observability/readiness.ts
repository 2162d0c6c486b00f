/**
 * A readiness check: resolves when ready, throws (with a reason) when not. A string it returns is a
 * detail of a ready replica (something is degraded, but taking the replica out would not help).
 */
// biome-ignore lint/suspicious/noConfusingVoidType: checks that only throw are written as void functions
export type ReadinessCheck = (signal: AbortSignal) => void | string | Promise<void | string>;

export interface CheckResult {
  name: string;
  ok: boolean;
  /** Why it failed; absent when ok. */
  error?: string;
  /** What is degraded although ready. */
  detail?: string;
}

/**
 * Named readiness checks (e.g. "redis", "draining"), added and removed as the daemon's parts come
 * and go. Checks run concurrently, each with a timeout.
 */
export class ReadinessChecks {
  readonly #checks = new Map<string, ReadinessCheck>();
  readonly #timeoutMs: number;

  constructor(options: { timeoutMs?: number } = {}) {
    this.#timeoutMs = options.timeoutMs ?? 2000;
  }

  /** Adds (or replaces) the check called `name`; returns a function that removes it. */
  add(name: string, check: ReadinessCheck): () => void {
    this.#checks.set(name, check);
    return () => {
      if (this.#checks.get(name) === check) this.#checks.delete(name);
    };
  }

  remove(name: string): void {
    this.#checks.delete(name);
  }

  get names(): string[] {
    return [...this.#checks.keys()];
  }

  async run(): Promise<{ ok: boolean; checks: CheckResult[] }> {
    const checks = await Promise.all([...this.#checks].map(([name, check]) => this.#runOne(name, check)));
    return { ok: checks.every((c) => c.ok), checks };
  }

  async #runOne(name: string, check: ReadinessCheck): Promise<CheckResult> {
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const err = new Error(`no answer within ${this.#timeoutMs} ms`);
        controller.abort(err);
        reject(err);
      }, this.#timeoutMs);
    });
    try {
      const detail = await Promise.race([Promise.resolve().then(() => check(controller.signal)), timeout]);
      return typeof detail === "string" ? { name, ok: true, detail } : { name, ok: true };
    } catch (err) {
      return { name, ok: false, error: err instanceof Error ? err.message : String(err) };
    } finally {
      clearTimeout(timer);
    }
  }
}
