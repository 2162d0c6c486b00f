// kas's readiness while it starts: /readiness is served from the moment the parts are open, so it
// must answer "not ready" until every module runs (the fronts listen), and stay so if the start fails.
import { describe, expect, test } from "vitest";
import { KasLifecycle } from "../../../cmd/kas/lifecycle.ts";
import { ReadinessChecks } from "../../../tool/observability/readiness.ts";

function lifecycleWith(start: () => Promise<void>) {
  const readiness = new ReadinessChecks();
  const lifecycle = new KasLifecycle({
    config: { shutdownGracePeriodMs: 0, shutdownDrainDelayMs: 0 },
    readiness,
    open: async () => ({}) as never,
    compose: () => ({ runner: { start, stop: async () => {} } as never, deps: {} as never }),
  });
  return { readiness, lifecycle };
}

describe("kas's readiness while it starts", () => {
  test("not ready until every module has started, ready once they have", async () => {
    let release: () => void = () => {};
    const modulesStarted = new Promise<void>((resolve) => {
      release = resolve;
    });
    const { readiness, lifecycle } = lifecycleWith(() => modulesStarted);
    const started = lifecycle.start();
    const during = await readiness.run();
    expect(during.ok).toBe(false);
    expect(during.checks.find((c) => !c.ok)?.name).toBe("start");
    release();
    await started;
    expect((await readiness.run()).ok).toBe(true);
  });

  test("a start that fails leaves kas not ready", async () => {
    const { readiness, lifecycle } = lifecycleWith(async () => {
      throw new Error("cannot listen on 8154");
    });
    await expect(lifecycle.start()).rejects.toThrow("cannot listen on 8154");
    expect((await readiness.run()).ok).toBe(false);
  });
});
