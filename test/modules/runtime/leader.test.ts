import { EventEmitter } from "node:events";
import { KubeConfig } from "@kubernetes/client-node";
import { expect, test } from "vitest";
import {
  type AgentkModuleDeps,
  clusterModule,
  LEADER_ONLY,
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

test("a cluster module: created with the Kubernetes configuration, idle with one line without one", async () => {
  const lines: string[] = [];
  const log = createLogger({
    level: "info",
    destination: { write: (line: string) => void lines.push(line) },
  });
  const created: unknown[] = [];
  const factory = (kc: KubeConfig | undefined) =>
    clusterModule({
      name: "on_cluster",
      kubeConfig: async () => kc,
      withoutCluster: "no Kubernetes configuration: nothing to do",
      create: async (config) => {
        created.push(config);
        return { name: "on_cluster", start: () => void created.push("started") };
      },
    });
  expect(factory(undefined)[LEADER_ONLY]).toBe(true);
  expect(factory(undefined).phase).toBe(Phase.capability);

  const idle = await factory(undefined).create({ log } as unknown as AgentkModuleDeps);
  await idle.start!(new AbortController().signal);
  expect(created).toEqual([]);
  expect(lines.filter((l) => l.includes("no Kubernetes configuration: nothing to do"))).toHaveLength(1);

  const kc = new KubeConfig();
  const running = await factory(kc).create({ log } as unknown as AgentkModuleDeps);
  await running.start!(new AbortController().signal);
  expect(created).toEqual([kc, "started"]);
  await running.close!(0);
});
