// The applier's view of the Kubernetes API: one object client with discovery in reach, and the
// small helpers every phase uses to read its answers.
import {
  ApiException,
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  type V1APIResource,
} from "@kubernetes/client-node";
import type { ObjectRef } from "./inventory.ts";

/** The message of a Kubernetes API error (its Status), or the error's own. */
export function errorMessage(err: unknown): string {
  if (err instanceof ApiException) {
    const body = err.body as unknown;
    let message: string | undefined;
    if (typeof body === "string") {
      try {
        message = (JSON.parse(body) as { message?: string }).message;
      } catch {
        message = body;
      }
    } else if (typeof body === "object" && body !== null) {
      message = (body as { message?: string }).message;
    }
    return `HTTP ${err.code}: ${message || "no message"}`;
  }
  return err instanceof Error ? err.message : String(err);
}

/** KubernetesObjectApi with its discovery (which kinds are served, and whether namespaced) in reach. */
export class ObjectApi extends KubernetesObjectApi {
  static make(kc: KubeConfig): ObjectApi {
    const client = kc.makeApiClient(ObjectApi);
    client.setDefaultNamespace(kc);
    return client;
  }

  /** The served resource of `kind` in `apiVersion` (cached; a kind not in the cache is looked up again). */
  served(apiVersion: string, kind: string): Promise<V1APIResource | undefined> {
    return this.resource(apiVersion, kind);
  }
}

export const statusCode = (err: unknown) => (err instanceof ApiException ? err.code : undefined);

/** Whether the kind is namespaced, or undefined when the cluster does not serve it. */
export async function servedScope(
  api: ObjectApi,
  apiVersion: string,
  kind: string,
): Promise<boolean | undefined> {
  try {
    const resource = await api.served(apiVersion, kind);
    return resource ? resource.namespaced : undefined;
  } catch (err) {
    if (statusCode(err) === 404) return undefined;
    throw err;
  }
}

/** What `read` and `delete` need to find the object `ref` names. */
export function objectSpec(apiVersion: string, ref: Pick<ObjectRef, "kind" | "namespace" | "name">) {
  return {
    apiVersion,
    kind: ref.kind,
    metadata: { name: ref.name, ...(ref.namespace && { namespace: ref.namespace }) },
  };
}

/** The object minus what the server writes on its own: to tell a dry run's change from a no-op. */
export function content(o: KubernetesObject | undefined): string {
  if (!o) return "";
  const { metadata, ...rest } = o as KubernetesObject & { status?: unknown };
  const { managedFields: _m, resourceVersion: _r, generation: _g, ...meta } = metadata ?? {};
  delete (rest as { status?: unknown }).status;
  return stableJson({ ...rest, metadata: meta });
}

function stableJson(v: unknown): string {
  return JSON.stringify(v, (_k, value: unknown) =>
    value && typeof value === "object" && !Array.isArray(value) && !(value instanceof Date)
      ? Object.fromEntries(Object.entries(value).sort(([a], [b]) => a.localeCompare(b)))
      : value,
  );
}

export function pick(r: ObjectRef): ObjectRef {
  return { group: r.group, kind: r.kind, namespace: r.namespace, name: r.name };
}
