import { groupVersion, type ResourceRegistry, type ResourceType, VERBS } from "./resources.ts";

/** What `/version` says: the Kubernetes version the test server stands in for. */
export const VERSION = {
  major: "1",
  minor: "32",
  gitVersion: "v1.32.0-test",
  gitCommit: "0000000000000000000000000000000000000000",
  gitTreeState: "clean",
  buildDate: "2024-12-11T00:00:00Z",
  goVersion: "go1.23.4",
  compiler: "gc",
  platform: "linux/amd64",
};

export const AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/** Whether the client accepts aggregated discovery (kubectl 1.32 asks for it first). */
export function wantsAggregated(accept: string | undefined): boolean {
  return (accept ?? "").split(",").some((part) => {
    const params = part.split(";").map((p) => p.trim());
    return (
      params.includes("g=apidiscovery.k8s.io") &&
      params.includes("v=v2") &&
      params.includes("as=APIGroupDiscoveryList")
    );
  });
}

const SUBRESOURCE_VERBS: Record<
  string,
  { kind: string; verbs: string[]; group?: string; version?: string } | undefined
> = {
  status: { kind: "", verbs: ["get", "patch", "update"] },
  scale: { kind: "Scale", verbs: ["get", "patch", "update"], group: "autoscaling", version: "v1" },
  log: { kind: "Pod", verbs: ["get"] },
  exec: { kind: "PodExecOptions", verbs: ["create", "get"] },
  attach: { kind: "PodAttachOptions", verbs: ["create", "get"] },
  portforward: { kind: "PodPortForwardOptions", verbs: ["create", "get"] },
};

/** `/api`: the legacy group's versions. */
export function apiVersions() {
  return {
    kind: "APIVersions",
    versions: ["v1"],
    serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: "127.0.0.1" }],
  };
}

function apiGroup(group: string, versions: string[]) {
  const entries = versions.map((version) => ({ groupVersion: `${group}/${version}`, version }));
  return { name: group, versions: entries, preferredVersion: entries[0] };
}

/** `/apis`: every named group. */
export function apiGroupList(registry: ResourceRegistry) {
  return {
    kind: "APIGroupList",
    apiVersion: "v1",
    groups: registry
      .groups()
      .filter((g) => g.group !== "")
      .map((g) => apiGroup(g.group, g.versions)),
  };
}

/** `/apis/<group>`, or undefined if not served. */
export function apiGroupOf(registry: ResourceRegistry, group: string) {
  const found = registry.groups().find((g) => g.group === group && group !== "");
  return found && { kind: "APIGroup", apiVersion: "v1", ...apiGroup(found.group, found.versions) };
}

/** `/api/v1`, `/apis/<group>/<version>`: the resources served there, or undefined if none. */
export function apiResourceList(registry: ResourceRegistry, group: string, version: string) {
  const types = registry.all().filter((t) => t.group === group && t.version === version);
  if (types.length === 0) return undefined;
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion: groupVersion({ group, version }),
    resources: types.flatMap((t) => [
      {
        name: t.plural,
        singularName: t.singular,
        namespaced: t.namespaced,
        kind: t.kind,
        verbs: VERBS,
        ...(t.shortNames && { shortNames: t.shortNames }),
        ...(t.categories && { categories: t.categories }),
      },
      ...t.subresources.map((sub) => ({
        name: `${t.plural}/${sub}`,
        singularName: "",
        namespaced: t.namespaced,
        kind: SUBRESOURCE_VERBS[sub]?.kind || t.kind,
        verbs: SUBRESOURCE_VERBS[sub]?.verbs ?? ["get"],
      })),
    ]),
  };
}

function discoveredResource(t: ResourceType) {
  return {
    resource: t.plural,
    responseKind: { group: t.group, version: t.version, kind: t.kind },
    scope: t.namespaced ? "Namespaced" : "Cluster",
    singularResource: t.singular,
    verbs: VERBS,
    ...(t.shortNames && { shortNames: t.shortNames }),
    ...(t.categories && { categories: t.categories }),
    ...(t.subresources.length > 0 && {
      subresources: t.subresources.map((sub) => ({
        subresource: sub,
        responseKind: {
          group: SUBRESOURCE_VERBS[sub]?.group ?? t.group,
          version: SUBRESOURCE_VERBS[sub]?.version ?? t.version,
          kind: SUBRESOURCE_VERBS[sub]?.kind || t.kind,
        },
        verbs: SUBRESOURCE_VERBS[sub]?.verbs ?? ["get"],
      })),
    }),
  };
}

/** Aggregated discovery (`apidiscovery.k8s.io/v2`): `/api` (legacy = true) or `/apis` in one document. */
export function aggregatedDiscovery(registry: ResourceRegistry, legacy: boolean) {
  return {
    kind: "APIGroupDiscoveryList",
    apiVersion: "apidiscovery.k8s.io/v2",
    metadata: {},
    items: registry
      .groups()
      .filter((g) => (g.group === "") === legacy)
      .map((g) => ({
        metadata: { name: g.group, creationTimestamp: null },
        versions: g.versions.map((version) => ({
          version,
          resources: registry
            .all()
            .filter((t) => t.group === g.group && t.version === version)
            .map(discoveredResource),
          freshness: "Current",
        })),
      })),
  };
}
