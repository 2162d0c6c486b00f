// What agents report of themselves repeats across agents (their namespace, agentk's version, the
// cluster's version): kept once for all of them rather than once per agent, each being a string (or
// object) of its own as decoded from the agent's message. Bounded: a table that fills is started
// again (what is interned already stays as it is).
import type { AgentPod, KubernetesVersion } from "./connected-agents.ts";

/** Distinct values kept at most (per table). */
const MAX_INTERNED = 4096;

class Interned<T> {
  readonly #table = new Map<string, T>();

  get(key: string, value: T): T {
    const kept = this.#table.get(key);
    if (kept !== undefined) return kept;
    if (this.#table.size >= MAX_INTERNED) this.#table.clear();
    this.#table.set(key, value);
    return value;
  }
}

const strings = new Interned<string>();
const versions = new Interned<Readonly<KubernetesVersion>>();

const str = (s: string): string => strings.get(s, s);

/**
 * `pod` with its repeating parts shared with other agents' equal ones: the strings, and the
 * Kubernetes version as one frozen object (nobody changes what was reported; frozen, nobody can).
 */
export function internPod(pod: AgentPod): AgentPod {
  const k = pod.kubernetesVersion;
  return {
    namespace: str(pod.namespace),
    name: pod.name, // unique to each pod
    version: str(pod.version),
    ...(pod.commitId !== undefined && { commitId: str(pod.commitId) }),
    ...(k && {
      kubernetesVersion: versions.get(
        JSON.stringify([k.major, k.minor, k.gitVersion, k.platform]),
        Object.freeze({
          major: str(k.major),
          minor: str(k.minor),
          gitVersion: str(k.gitVersion),
          platform: str(k.platform),
        }),
      ),
    }),
  };
}
