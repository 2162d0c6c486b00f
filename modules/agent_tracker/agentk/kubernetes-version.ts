// The cluster's version, as agentk reports it to kas (GitLab shows it with each agent): what the API
// server's `/version` says, read with agentk's own Kubernetes configuration.
import type { KubeConfig } from "@kubernetes/client-node";
import type { KubernetesVersion } from "../../../proto/gen/agent_tracker/v1/agent_tracker.ts";

/** kas refuses longer fields (AGENT_POD_LIMITS.field); a longer answer is cut rather than refused. */
const FIELD_LIMIT = 253;

/** `/version` of the cluster `kc` names; rejects when the API server cannot be asked. */
export async function readKubernetesVersion(kc: KubeConfig): Promise<KubernetesVersion> {
  const { VersionApi } = await import("@kubernetes/client-node");
  const info = await kc.makeApiClient(VersionApi).getCode();
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
