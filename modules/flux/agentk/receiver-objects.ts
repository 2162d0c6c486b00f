// The objects GitLab's agent makes for each GitRepository on GitLab: a Flux webhook `Receiver`
// (notification.toolkit.fluxcd.io/v1, type generic) that asks for the GitRepository's
// reconciliation, annotated with the GitLab project it follows, and the Secret its webhook path is
// derived from (an empty token, as GitLab's). Both are owned by the GitRepository, so they go with
// it. Names, annotations and shapes are GitLab's (internal/module/flux/agent).
import type { KubernetesObject } from "@kubernetes/client-node";

export const SOURCE_GROUP = "source.toolkit.fluxcd.io";
export const NOTIFICATION_GROUP = "notification.toolkit.fluxcd.io";
export const GIT_REPOSITORY_API_VERSION = `${SOURCE_GROUP}/v1`;
export const RECEIVER_API_VERSION = `${NOTIFICATION_GROUP}/v1`;

/** The GitLab project (full path) a Receiver follows. */
export const PROJECT_ANNOTATION = "agent.gitlab.com/project";
export const AGENT_ID_ANNOTATION = "agent.gitlab.com/id";
export const MANAGED_BY_ANNOTATION = "app.kubernetes.io/managed-by";
export const MANAGED_BY = "gitlab";

const PREFIX = "gitlab-";
const MAX_RECEIVER_NAME = 63;
const MAX_SECRET_NAME = 253;
const RECEIVER_INTERVAL = "5m0s";

export interface GitRepository extends KubernetesObject {
  metadata: NonNullable<KubernetesObject["metadata"]> & { name: string; namespace: string; uid?: string };
  spec?: { url?: unknown };
}

export interface Receiver extends KubernetesObject {
  metadata: NonNullable<KubernetesObject["metadata"]> & { name: string; namespace: string };
  status?: { webhookPath?: unknown };
}

/**
 * `gitlab-<name>`, at most `n` characters and ending alphanumerically (GitLab's objectWithPrefix:
 * best effort RFC 1123, not unique).
 */
export function prefixedName(name: string, n: number): string {
  let result = PREFIX + name;
  if (result.length > n) {
    result = result.slice(0, n);
    if (!/[A-Za-z0-9]$/.test(result)) result = `${result.slice(0, n - 2)}-x`;
  }
  return result;
}

function ownedBy(repository: GitRepository) {
  return [
    {
      apiVersion: GIT_REPOSITORY_API_VERSION,
      kind: "GitRepository",
      name: repository.metadata.name,
      uid: repository.metadata.uid ?? "",
      controller: true,
      blockOwnerDeletion: true,
    },
  ];
}

export function receiverSecret(
  agentId: string,
  repository: GitRepository,
): KubernetesObject & { metadata: { name: string }; data: Record<string, string> } {
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: {
      name: prefixedName(`receiver-${repository.metadata.name}`, MAX_SECRET_NAME),
      namespace: repository.metadata.namespace,
      ownerReferences: ownedBy(repository),
      annotations: { [MANAGED_BY_ANNOTATION]: MANAGED_BY, [AGENT_ID_ANNOTATION]: agentId },
    },
    data: { token: "" },
  };
}

export function receiver(
  agentId: string,
  repository: GitRepository,
  project: string,
  secretName: string,
): Receiver {
  return {
    apiVersion: RECEIVER_API_VERSION,
    kind: "Receiver",
    metadata: {
      name: prefixedName(repository.metadata.name, MAX_RECEIVER_NAME),
      namespace: repository.metadata.namespace,
      ownerReferences: ownedBy(repository),
      annotations: {
        [MANAGED_BY_ANNOTATION]: MANAGED_BY,
        [AGENT_ID_ANNOTATION]: agentId,
        [PROJECT_ANNOTATION]: project,
      },
    },
    spec: {
      type: "generic",
      interval: RECEIVER_INTERVAL,
      resources: [
        { kind: "GitRepository", name: repository.metadata.name, namespace: repository.metadata.namespace },
      ],
      secretRef: { name: secretName },
    },
  } as Receiver;
}

/** The GitRepository that owns (controls) `object`, by name in its namespace. */
export function owningRepository(object: KubernetesObject): string | undefined {
  const owner = object.metadata?.ownerReferences?.find((o) => o.controller);
  if (owner?.kind !== "GitRepository") return undefined;
  return owner.apiVersion.split("/")[0] === SOURCE_GROUP ? owner.name : undefined;
}
