// kas's side of agents with modules: what their static token entries name (a configuration project,
// a GitOps manifest project, as local git repositories) and the settings the bench changes.
import { makeConfigRepos, makeManifestRepos } from "../lib/agent-repos.ts";
import { MANIFEST_PROJECT, type ModuleName } from "./agent-modules.ts";

/** Agents per repository: many agents share one configuration (and one manifest) repository. */
const AGENTS_PER_REPO = 100;

export interface KasModulesSetup {
  tokenFields: (i: number) => Record<string, unknown>;
  kasEnv: Record<string, string>;
}

/** Makes the repositories under `dir` for `agents` agents running `modules`. */
export function kasModulesSetup(
  dir: string,
  agents: number,
  modules: readonly ModuleName[],
): KasModulesSetup {
  if (modules.length === 0) return { tokenFields: () => ({}), kasEnv: {} };
  const n = Math.max(1, Math.ceil(agents / AGENTS_PER_REPO));
  const config = makeConfigRepos(dir, n, agents);
  const manifests = modules.includes("gitops") ? makeManifestRepos(dir, n) : [];
  return {
    tokenFields: (i) => ({
      repository: config[i % n],
      ...(manifests.length > 0 && { manifest_projects: { [MANIFEST_PROJECT]: manifests[i % n] } }),
    }),
    // The first reads of thousands of files at kas's default 15 calls/s per server would take
    // minutes; memory and idle CPU do not depend on it (bench:config does the same).
    kasEnv: Object.fromEntries(
      ["GLOBAL", "PER_SERVER"].flatMap((s) => [
        [`KAS_GITALY_${s}_API_RATE_LIMIT_REFILL_RATE_PER_SECOND`, "1000"],
        [`KAS_GITALY_${s}_API_RATE_LIMIT_BUCKET_SIZE`, "2000"],
      ]),
    ),
  };
}
