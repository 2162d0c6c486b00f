// Modules that must run once per agent, not once per agentk replica: they run on the replica that
// holds the agent's leader lease, and move with it.
import type { KubeConfig } from "@kubernetes/client-node";
import { DEFAULT_GRACE_MS } from "../../lib/tunnel/index.ts";
import type { AgentkModuleDeps } from "./agentk.ts";
import { type Module, type ModuleFactory, Phase } from "./module.ts";

/** Marks a factory built by {@link leaderOnly}: the daemon runs a leader election only when it has one. */
export const LEADER_ONLY = Symbol("leaderOnly");

/**
 * `factory`'s module, built and started each time this replica becomes leader (a fresh instance
 * per term, whose logger names it: `module`) and drained and closed when it stops leading or agentk stops. Without a leader
 * election (no Kubernetes configuration: a single replica), it simply runs.
 */
export function leaderOnly(
  factory: ModuleFactory<AgentkModuleDeps>,
  { lossGraceMs = DEFAULT_GRACE_MS } = {},
): ModuleFactory<AgentkModuleDeps> & { [LEADER_ONLY]: true } {
  return {
    [LEADER_ONLY]: true,
    name: factory.name,
    phase: factory.phase,
    create(deps) {
      const { leader, log } = deps;
      let current: { module: Module; stop: AbortController } | undefined;
      // Terms start and end one after the other, never overlapping.
      let transitions: Promise<void> = Promise.resolve();
      const step = (fn: () => Promise<void>) => {
        transitions = transitions
          .then(fn)
          .catch((err: unknown) => log.error({ err, module: factory.name }, "leader-only module failed"));
        return transitions;
      };
      const begin = () =>
        step(async () => {
          if (current) return;
          // The module's own lines say which module: the logger is its own.
          const module = await factory.create({ ...deps, log: log.child({ module: factory.name }) });
          const stop = new AbortController();
          current = { module, stop };
          await module.start?.(stop.signal);
        });
      const end = (graceMs: number) =>
        step(async () => {
          const ending = current;
          current = undefined;
          if (!ending) return;
          ending.module.drain?.();
          ending.stop.abort(new Error("not leading"));
          await ending.module.close?.(graceMs);
        });
      const onElected = () => void begin();
      const onLost = () => void end(lossGraceMs);
      return {
        name: factory.name,
        async start(signal) {
          if (!leader) {
            log.info({ module: factory.name }, "no leader election (no Kubernetes configuration): runs here");
            await begin();
            return;
          }
          leader.on("elected", onElected);
          leader.on("lost", onLost);
          signal.addEventListener("abort", () => {
            leader.off("elected", onElected);
            leader.off("lost", onLost);
          });
          if (leader.leading) await begin();
        },
        drain: () => current?.module.drain?.(),
        close: (graceMs) => end(graceMs),
      };
    },
  };
}

export interface ClusterModuleSpec {
  name: string;
  /** agentk's Kubernetes configuration, read as each term begins. */
  kubeConfig: () => Promise<KubeConfig | undefined>;
  /** Logged when agentk has no Kubernetes configuration; the module then does nothing. */
  withoutCluster: string;
  create(kc: KubeConfig, deps: AgentkModuleDeps): Promise<Module>;
}

/** A capability that works on the agent's cluster: once per agent ({@link leaderOnly}), idle without a cluster. */
export function clusterModule(spec: ClusterModuleSpec): ReturnType<typeof leaderOnly> {
  return leaderOnly({
    name: spec.name,
    phase: Phase.capability,
    async create(deps) {
      const kc = await spec.kubeConfig();
      if (kc) return spec.create(kc, deps);
      deps.log.info(spec.withoutCluster);
      return { name: spec.name };
    },
  });
}
