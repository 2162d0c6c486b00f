import { describe, expect, test } from "vitest";
import {
  LatestValue,
  type Module,
  ModuleCloseError,
  type ModuleFactory,
  ModuleRunner,
  Phase,
} from "../../../modules/runtime/index.ts";

/** A factory whose module records what happens to it in `log`. */
function recorder(
  log: string[],
  name: string,
  phase: Phase,
  behave: { startFails?: boolean; closeFails?: boolean; closeTakesMs?: number } = {},
): ModuleFactory<{ tag: string }> {
  return {
    name,
    phase,
    create: ({ tag }) => {
      log.push(`create ${name} ${tag}`);
      const module: Module = {
        name,
        start(signal) {
          log.push(`start ${name}`);
          signal.addEventListener("abort", () => log.push(`abort ${name}`));
          if (behave.startFails) throw new Error(`${name} cannot start`);
        },
        drain: () => void log.push(`drain ${name}`),
        async close(graceMs) {
          log.push(`close ${name} ${graceMs > 0 ? "grace" : "now"}`);
          if (behave.closeTakesMs) await new Promise((r) => setTimeout(r, behave.closeTakesMs));
          if (behave.closeFails) throw new Error(`${name} cannot close`);
        },
      };
      return module;
    },
  };
}

describe("module runner", () => {
  test("builds every module first, starts by phase (list order within one), stops in reverse after draining all", async () => {
    const log: string[] = [];
    const runner = new ModuleRunner([
      recorder(log, "front", Phase.front),
      recorder(log, "cap-a", Phase.capability),
      recorder(log, "obs", Phase.observability),
      recorder(log, "cap-b", Phase.capability),
    ]);
    expect(runner.order).toEqual(["obs", "cap-a", "cap-b", "front"]);
    await runner.start({ tag: "deps" });
    expect(log.splice(0)).toEqual([
      "create front deps",
      "create cap-a deps",
      "create obs deps",
      "create cap-b deps",
      "start obs",
      "start cap-a",
      "start cap-b",
      "start front",
    ]);
    await runner.close(1000);
    expect(log.slice(0, 4).sort()).toEqual(["abort cap-a", "abort cap-b", "abort front", "abort obs"]);
    expect(log.slice(4)).toEqual([
      "drain front",
      "drain cap-a",
      "drain cap-b",
      "drain obs",
      "close front grace",
      "close cap-a grace",
      "close cap-b grace",
      "close obs grace",
    ]);
  });

  test("a module that fails to start: what was built is closed at once, the start error is thrown", async () => {
    const log: string[] = [];
    const runner = new ModuleRunner([
      recorder(log, "obs", Phase.observability),
      recorder(log, "broken", Phase.capability, { startFails: true }),
      recorder(log, "front", Phase.front),
    ]);
    await expect(runner.start({ tag: "x" })).rejects.toThrow("broken cannot start");
    expect(log).not.toContain("start front");
    expect(log.filter((l) => l.startsWith("close"))).toEqual([
      "close front now",
      "close broken now",
      "close obs now",
    ]);
  });

  test("a module that fails to close: the others still close, then stop rejects naming it", async () => {
    const log: string[] = [];
    const runner = new ModuleRunner([
      recorder(log, "obs", Phase.observability),
      recorder(log, "leaky", Phase.capability, { closeFails: true }),
      recorder(log, "front", Phase.front),
    ]);
    await runner.start({ tag: "x" });
    const err = await runner.close(100).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModuleCloseError);
    expect((err as ModuleCloseError).errors.map((e: Error) => e.message)).toEqual([
      "module leaky failed to close",
    ]);
    expect(log.filter((l) => l.startsWith("close"))).toEqual([
      "close front grace",
      "close leaky grace",
      "close obs grace",
    ]);
  });

  test("a module whose close never settles: the stop goes on without it once its grace is overrun", async () => {
    const log: string[] = [];
    const stuck: ModuleFactory<{ tag: string }> = {
      name: "stuck",
      phase: Phase.capability,
      create: () => ({ name: "stuck", close: () => new Promise<void>(() => {}) }),
    };
    const runner = new ModuleRunner([recorder(log, "obs", Phase.observability), stuck]);
    await runner.start({ tag: "x" });
    const err = await runner.close(50).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModuleCloseError);
    const failure = (err as ModuleCloseError).errors[0]!;
    expect(failure.message).toBe("module stuck failed to close");
    expect((failure.cause as Error).message).toMatch(/^did not close within \d+ ms$/);
    expect(log).toContain("close obs now"); // the next phase still closed, its grace spent
  });

  test("one grace period for all phases: a slow phase leaves the next what remains", async () => {
    const log: string[] = [];
    const runner = new ModuleRunner([
      recorder(log, "obs", Phase.observability),
      recorder(log, "slow", Phase.front, { closeTakesMs: 80 }),
    ]);
    await runner.start({ tag: "x" });
    await runner.close(50);
    expect(log.filter((l) => l.startsWith("close"))).toEqual(["close slow grace", "close obs now"]);
  });

  test("a module listed twice is refused", () => {
    expect(() => new ModuleRunner([recorder([], "a", Phase.core), recorder([], "a", Phase.front)])).toThrow(
      /listed twice/,
    );
  });
});

describe("latest value", () => {
  test("a busy reader skips to the newest value; nothing queues", async () => {
    const value = new LatestValue<number>();
    const stop = new AbortController();
    const seen: number[] = [];
    const reading = (async () => {
      for await (const v of value.watch(stop.signal)) {
        seen.push(v);
        if (v === 1) {
          // Busy with 1 while 2 and 3 are set: only 3 is seen next.
          value.set(2);
          value.set(3);
        }
        if (v === 3) stop.abort();
      }
    })();
    value.set(1);
    await reading;
    expect(seen).toEqual([1, 3]);
    expect(value.current).toBe(3);
  });

  test("a reader that starts late gets the current value first; abort ends the watch", async () => {
    const value = new LatestValue<string>();
    value.set("a");
    const stop = new AbortController();
    const it = value.watch(stop.signal);
    expect((await it.next()).value).toBe("a");
    const pending = it.next();
    stop.abort();
    expect(await pending).toEqual({ done: true, value: undefined });
  });
});
