import { createHash } from "node:crypto";
import { groupVersion, type ResourceRegistry, type ResourceType } from "./resources.ts";

/**
 * The smallest OpenAPI v3 that kubectl is content with. kubectl reads it before `create` and
 * `apply` to learn whether the server validates fields itself (`fieldValidation`, a PATCH query
 * parameter of the kind's path); finding it, kubectl sends `fieldValidation=Strict` and skips
 * client-side validation. Without `/openapi/v3` kubectl falls back to `/openapi/v2` and, without
 * that either, refuses to create anything. No schemas: kubectl then takes strategic-merge
 * metadata for client-side apply from its compiled-in types.
 */
export function openApiV3Root(registry: ResourceRegistry) {
  const paths: Record<string, { serverRelativeURL: string }> = {};
  for (const g of registry.groups()) {
    for (const version of g.versions) {
      const gv = groupVersion({ group: g.group, version });
      const prefix = g.group === "" ? "api/v1" : `apis/${gv}`;
      const hash = createHash("sha256")
        .update(JSON.stringify(openApiV3GroupVersion(registry, g.group, version)))
        .digest("hex")
        .slice(0, 32)
        .toUpperCase();
      paths[prefix] = { serverRelativeURL: `/openapi/v3/${prefix}?hash=${hash}` };
    }
  }
  return { paths };
}

const PARAMETERS = ["dryRun", "fieldManager", "fieldValidation", "force", "pretty"].map((name) => ({
  name,
  in: "query",
  schema: { type: name === "force" ? "boolean" : "string", uniqueItems: true },
}));

function pathOf(t: ResourceType, named: boolean): string {
  const base = t.group === "" ? "/api/v1" : `/apis/${groupVersion(t)}`;
  return `${base}${t.namespaced ? "/namespaces/{namespace}" : ""}/${t.plural}${named ? "/{name}" : ""}`;
}

/** `/openapi/v3/api/v1`, `/openapi/v3/apis/<group>/<version>`; undefined if not served. */
export function openApiV3GroupVersion(registry: ResourceRegistry, group: string, version: string) {
  const types = registry.all().filter((t) => t.group === group && t.version === version);
  if (types.length === 0) return undefined;
  const paths: Record<string, unknown> = {};
  for (const t of types) {
    const gvk = { "x-kubernetes-group-version-kind": { group: t.group, version: t.version, kind: t.kind } };
    const op = (verb: string) => ({
      operationId: `${verb}${t.kind}`,
      parameters: PARAMETERS,
      responses: { "200": { description: "OK" } },
      "x-kubernetes-action": verb,
      ...gvk,
    });
    paths[pathOf(t, false)] = { get: op("list"), post: op("post") };
    paths[pathOf(t, true)] = { get: op("get"), put: op("put"), patch: op("patch"), delete: op("delete") };
  }
  return {
    openapi: "3.0.0",
    info: { title: "Kubernetes", version: "v1.32.0-test" },
    paths,
    components: { schemas: {} },
  };
}

/**
 * `/openapi/v2` as kubectl reads it (gnostic's protobuf `openapi.v2.Document`): the version and an
 * info block, no definitions. kubectl falls back to it to validate a kind that `/openapi/v3` does
 * not list (a typo, a CRD not installed yet); finding no schema, it lets the kind's mapping fail
 * with "no matches for kind", as against a real server.
 */
export function openApiV2Protobuf(): Buffer {
  const field = (n: number, bytes: Buffer) =>
    Buffer.concat([Buffer.from([(n << 3) | 2, bytes.length]), bytes]);
  const info = Buffer.concat([field(1, Buffer.from("Kubernetes")), field(2, Buffer.from("v1.32.0-test"))]);
  return Buffer.concat([field(1, Buffer.from("2.0")), field(2, info)]);
}
