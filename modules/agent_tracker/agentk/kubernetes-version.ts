// The cluster's version, as agentk reports it to kas (GitLab shows it with each agent): what the API
// server's `/version` says, read with agentk's own Kubernetes configuration.
import type { KubeConfig } from "@kubernetes/client-node";
import type { KubernetesVersion } from "../../../proto/gen/agent_tracker/v1/agent_tracker.ts";

/** kas refuses longer fields (AGENT_POD_LIMITS.field); a longer answer is cut rather than refused. */
const FIELD_LIMIT = 253;

/** How long a `/version` read may take: an API server that never answers must not hold the next read back. */
export const VERSION_READ_TIMEOUT_MS = 10_000;

/** `/version` of the cluster `kc` names; rejects when the API server cannot be asked in time. */
export async function readKubernetesVersion(
  kc: KubeConfig,
  timeoutMs = VERSION_READ_TIMEOUT_MS,
): Promise<KubernetesVersion> {
  const { VersionApi } = await import("@kubernetes/client-node");
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`the API server's /version did not answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
  });
  const info = await Promise.race([kc.makeApiClient(VersionApi).getCode(), deadline]).finally(() =>
    clearTimeout(timer),
  );
  const field = (v: unknown) => (typeof v === "string" ? v.slice(0, FIELD_LIMIT) : "");
  return {
    major: field(info.major),
    minor: field(info.minor),
    gitVersion: field(info.gitVersion),
    platform: field(info.platform),
  };
}

export const sameVersion = (a: KubernetesVersion | undefined, b: KubernetesVersion | undefined): boolean =>
  a === b ||
  (a !== undefined &&
    b !== undefined &&
    a.major === b.major &&
    a.minor === b.minor &&
    a.gitVersion === b.gitVersion &&
    a.platform === b.platform);
