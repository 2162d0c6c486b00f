/** What the test server knows about a kind of object: where it is served and how it is named. */
export interface ResourceType {
  /** "" for the core group. */
  group: string;
  version: string;
  plural: string;
  singular: string;
  kind: string;
  listKind: string;
  namespaced: boolean;
  shortNames?: string[];
  categories?: string[];
  /** `status` splits writes as the real server does: the main resource ignores status, the subresource ignores the rest. */
  subresources: string[];
  /** Served from a CustomResourceDefinition (strategic merge patch is refused, as by the real server). */
  custom?: boolean;
}

/** `plural` for the core group, `plural.group` otherwise: how the store names a resource. */
export function resourceId(t: Pick<ResourceType, "group" | "plural">): string {
  return t.group === "" ? t.plural : `${t.plural}.${t.group}`;
}

export function groupVersion(t: Pick<ResourceType, "group" | "version">): string {
  return t.group === "" ? t.version : `${t.group}/${t.version}`;
}

export const VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

function builtIn(
  group: string,
  version: string,
  plural: string,
  kind: string,
  namespaced: boolean,
  extra: Partial<ResourceType> = {},
): ResourceType {
  return {
    group,
    version,
    plural,
    kind,
    namespaced,
    singular: kind.toLowerCase(),
    listKind: `${kind}List`,
    subresources: [],
    ...extra,
  };
}

export const BUILT_IN: readonly ResourceType[] = [
  builtIn("", "v1", "namespaces", "Namespace", false, { shortNames: ["ns"], subresources: ["status"] }),
  builtIn("", "v1", "configmaps", "ConfigMap", true, { shortNames: ["cm"] }),
  builtIn("", "v1", "secrets", "Secret", true),
  builtIn("", "v1", "services", "Service", true, {
    shortNames: ["svc"],
    categories: ["all"],
    subresources: ["status"],
  }),
  builtIn("", "v1", "pods", "Pod", true, {
    shortNames: ["po"],
    categories: ["all"],
    subresources: ["status", "log", "exec", "attach", "portforward"],
  }),
  builtIn("", "v1", "events", "Event", true, { shortNames: ["ev"] }),
  builtIn("", "v1", "nodes", "Node", false, { shortNames: ["no"], subresources: ["status"] }),
  builtIn("", "v1", "serviceaccounts", "ServiceAccount", true, { shortNames: ["sa"] }),
  builtIn("apps", "v1", "deployments", "Deployment", true, {
    shortNames: ["deploy"],
    categories: ["all"],
    subresources: ["status", "scale"],
  }),
  builtIn("apps", "v1", "statefulsets", "StatefulSet", true, {
    shortNames: ["sts"],
    categories: ["all"],
    subresources: ["status", "scale"],
  }),
  builtIn("apps", "v1", "daemonsets", "DaemonSet", true, {
    shortNames: ["ds"],
    categories: ["all"],
    subresources: ["status"],
  }),
  builtIn("apps", "v1", "replicasets", "ReplicaSet", true, {
    shortNames: ["rs"],
    categories: ["all"],
    subresources: ["status", "scale"],
  }),
  builtIn("rbac.authorization.k8s.io", "v1", "roles", "Role", true),
  builtIn("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true),
  builtIn("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false),
  builtIn("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", false),
  builtIn("coordination.k8s.io", "v1", "leases", "Lease", true),
  builtIn("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true, {
    shortNames: ["pdb"],
    subresources: ["status"],
  }),
  builtIn("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", true, { shortNames: ["netpol"] }),
  builtIn("networking.k8s.io", "v1", "ingresses", "Ingress", true, {
    shortNames: ["ing"],
    subresources: ["status"],
  }),
  builtIn("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", false, {
    shortNames: ["crd", "crds"],
    subresources: ["status"],
  }),
];

/**
 * The resource types served now: the built-in ones, plus one per served version of every
 * CustomResourceDefinition (added when the CRD is written, removed when it is deleted).
 */
export class ResourceRegistry {
  readonly #types: ResourceType[] = [...BUILT_IN];

  all(): readonly ResourceType[] {
    return this.#types;
  }

  /** Group versions in the order discovery lists them (core first). */
  groups(): { group: string; versions: string[] }[] {
    const out = new Map<string, string[]>();
    for (const t of this.#types) {
      const versions = out.get(t.group) ?? [];
      if (!versions.includes(t.version)) versions.push(t.version);
      out.set(t.group, versions);
    }
    return [...out].map(([group, versions]) => ({ group, versions }));
  }

  /** The type served at `/api(s)/<group>/<version>/<plural>`. */
  at(group: string, version: string, plural: string): ResourceType | undefined {
    return this.#types.find((t) => t.group === group && t.version === version && t.plural === plural);
  }

  /** By store name: `pods`, `deployments`, `deployments.apps`, `widgets.example.com` (the preferred version). */
  resolve(name: string): ResourceType {
    const found =
      this.#types.find((t) => resourceId(t) === name) ?? this.#types.find((t) => t.plural === name);
    if (!found) throw new Error(`the test server serves no resource ${JSON.stringify(name)}`);
    return found;
  }

  /** The type with this apiVersion and kind (what a manifest names). */
  byKind(apiVersion: string, kind: string): ResourceType | undefined {
    return this.#types.find((t) => groupVersion(t) === apiVersion && t.kind === kind);
  }

  /** Serves the versions a CRD declares (replacing what it declared before). */
  defineCustom(crd: CustomResourceDefinition): void {
    this.removeCustom(crd.spec.group, crd.spec.names.plural);
    const { names, group, scope } = crd.spec;
    for (const v of crd.spec.versions.filter((v) => v.served !== false)) {
      this.#types.push({
        group,
        version: v.name,
        plural: names.plural,
        singular: names.singular ?? names.kind.toLowerCase(),
        kind: names.kind,
        listKind: names.listKind ?? `${names.kind}List`,
        namespaced: scope !== "Cluster",
        ...(names.shortNames && { shortNames: names.shortNames }),
        ...(names.categories && { categories: names.categories }),
        subresources: v.subresources?.status ? ["status"] : [],
        custom: true,
      });
    }
  }

  removeCustom(group: string, plural: string): void {
    for (let i = this.#types.length - 1; i >= 0; i--) {
      const t = this.#types[i]!;
      if (t.custom && t.group === group && t.plural === plural) this.#types.splice(i, 1);
    }
  }
}

export interface CustomResourceDefinition {
  metadata: { name: string };
  spec: {
    group: string;
    scope?: string;
    names: {
      plural: string;
      singular?: string;
      kind: string;
      listKind?: string;
      shortNames?: string[];
      categories?: string[];
    };
    versions: { name: string; served?: boolean; storage?: boolean; subresources?: { status?: object } }[];
  };
}
