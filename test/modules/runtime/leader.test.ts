import { EventEmitter } from "node:events";
import { expect, test } from "vitest";
import {
  type AgentkModuleDeps,
  type LeaderElection,
  leaderOnly,
  type ModuleFactory,
  Phase,
} from "../../../modules/runtime/index.ts";
import { createLogger } from "../../../tool/observability/index.ts";
import { until } from "../../support/until.ts";

/** A leader election the test drives. */
class TestElection extends EventEmitter<{ elected: []; lost: [] }> implements LeaderElection {
  leading = false;
  set(leading: boolean) {
    this.leading = leading;
    this.emit(leading ? "elected" : "lost");
  }
}

function counting(log: string[]): ModuleFactory<AgentkModuleDeps> {
  let n = 0;
  return {
    name: "once_per_agent",
    phase: Phase.capability,
    create() {
      const id = ++n;
      log.push(`create ${id}`);
      return {
        name: "once_per_agent",
        start: () => void log.push(`start ${id}`),
        close: async () => void log.push(`close ${id}`),
      };
    },
  };
}

const deps = (leader?: LeaderElection) =>
  ({ log: createLogger({ level: "silent" }), ...(leader && { leader }) }) as unknown as AgentkModuleDeps;

test("a leader-only module runs while this replica leads, a fresh instance each term", async () => {
  const log: string[] = [];
  const election = new TestElection();
  const module = await leaderOnly(counting(log)).create(deps(election));
  const stop = new AbortController();
  await module.start!(stop.signal);
  expect(log).toEqual([]); // not leading: nothing runs
  election.set(true);
  await until(() => log.length === 2, 2000, "first term");
  election.set(false);
  await until(() => log.length === 3, 2000, "first term ends");
  election.set(true);
  await until(() => log.length === 5, 2000, "second term");
  stop.abort();
  await module.close!(0);
  expect(log).toEqual(["create 1", "start 1", "close 1", "create 2", "start 2", "close 2"]);
});

test("without a leader election (no Kubernetes configuration) it simply runs", async () => {
  const log: string[] = [];
  const module = await leaderOnly(counting(log)).create(deps());
  await module.start!(new AbortController().signal);
  expect(log).toEqual(["create 1", "start 1"]);
  await module.close!(0);
  expect(log).toEqual(["create 1", "start 1", "close 1"]);
});
