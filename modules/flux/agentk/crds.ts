// Whether Flux is installed: GitLab's agent runs its Flux module only where the GitRepository
// (source.toolkit.fluxcd.io/v1) and Receiver (notification.toolkit.fluxcd.io/v1) CRDs are served
// and Established.
import { ApiException, ApiextensionsV1Api, type KubeConfig } from "@kubernetes/client-node";

export const REQUIRED_CRDS = [
  { name: "gitrepositories.source.toolkit.fluxcd.io", version: "v1" },
  { name: "receivers.notification.toolkit.fluxcd.io", version: "v1" },
] as const;

/** The first required CRD that is missing, not served at its version, or not Established; undefined when all are. */
export async function missingFluxCrd(kc: KubeConfig): Promise<string | undefined> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  for (const { name, version } of REQUIRED_CRDS) {
    let crd: Awaited<ReturnType<ApiextensionsV1Api["readCustomResourceDefinition"]>>;
    try {
      crd = await api.readCustomResourceDefinition({ name });
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) return `${name} (not installed)`;
      throw err;
    }
    // Optional chains: an answer that is no CRD at all (a proxy's page) means no Flux here either.
    if (!crd?.spec?.versions?.some((v) => v.name === version && v.served))
      return `${name} (${version} not served)`;
    const established = crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True");
    if (!established) return `${name} (not Established)`;
  }
  return undefined;
}
