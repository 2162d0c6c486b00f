import { StoreError } from "./store.ts";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);

export const PATCH_TYPES = {
  "application/json-patch+json": "json",
  "application/merge-patch+json": "merge",
  "application/strategic-merge-patch+json": "strategic",
  "application/apply-patch+yaml": "apply",
} as const;

export type PatchType = (typeof PATCH_TYPES)[keyof typeof PATCH_TYPES];

/** The patch type of a request's content type, or undefined (415). */
export function patchTypeOf(contentType: string | undefined): PatchType | undefined {
  const base = (contentType ?? "").split(";")[0]!.trim() as keyof typeof PATCH_TYPES;
  return PATCH_TYPES[base];
}

/** RFC 7386 JSON merge patch: objects merged, `null` deletes, anything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return structuredClone(patch);
  const result: JsonObject = isObject(target) ? structuredClone(target) : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete result[k];
    else result[k] = mergePatch(result[k], v) as Json;
  }
  return result;
}

function unescapeToken(token: string): string {
  return token.replace(/~1/g, "/").replace(/~0/g, "~");
}

function invalid(message: string): StoreError {
  return new StoreError(422, "Invalid", message);
}

/** RFC 6902 JSON patch: add, remove, replace, move, copy, test. */
export function jsonPatch(target: unknown, patch: unknown): unknown {
  if (!Array.isArray(patch))
    throw new StoreError(400, "BadRequest", "a JSON patch must be an array of operations");
  let doc = structuredClone(target) as Json;
  const parse = (pointer: unknown): string[] => {
    if (typeof pointer !== "string" || (pointer !== "" && !pointer.startsWith("/"))) {
      throw invalid(`invalid JSON pointer ${JSON.stringify(pointer)}`);
    }
    return pointer === "" ? [] : pointer.slice(1).split("/").map(unescapeToken);
  };
  const parentOf = (path: string[]): [Json, string] => {
    let node: Json = doc;
    for (const token of path.slice(0, -1)) {
      const next: Json | undefined = Array.isArray(node)
        ? node[Number(token)]
        : isObject(node)
          ? node[token]
          : undefined;
      if (next === undefined)
        throw invalid(`the path ${JSON.stringify(`/${path.join("/")}`)} does not exist`);
      node = next;
    }
    return [node, path.at(-1)!];
  };
  const get = (path: string[]): Json => {
    if (path.length === 0) return doc;
    const [parent, key] = parentOf(path);
    const v = Array.isArray(parent) ? parent[Number(key)] : isObject(parent) ? parent[key] : undefined;
    if (v === undefined) throw invalid(`the path ${JSON.stringify(`/${path.join("/")}`)} does not exist`);
    return v;
  };
  const remove = (path: string[]): Json => {
    const value = get(path);
    const [parent, key] = parentOf(path);
    if (Array.isArray(parent)) parent.splice(Number(key), 1);
    else delete (parent as JsonObject)[key];
    return value;
  };
  const add = (path: string[], value: Json) => {
    if (path.length === 0) {
      doc = value;
      return;
    }
    const [parent, key] = parentOf(path);
    if (Array.isArray(parent)) {
      const index = key === "-" ? parent.length : Number(key);
      if (!(index >= 0 && index <= parent.length)) throw invalid(`array index ${key} out of range`);
      parent.splice(index, 0, value);
    } else if (isObject(parent)) parent[key] = value;
    else throw invalid(`cannot add at ${JSON.stringify(`/${path.join("/")}`)}`);
  };
  for (const op of patch as Record<string, unknown>[]) {
    const path = parse(op.path);
    switch (op.op) {
      case "add":
        add(path, structuredClone(op.value) as Json);
        break;
      case "remove":
        remove(path);
        break;
      case "replace":
        remove(path);
        add(path, structuredClone(op.value) as Json);
        break;
      case "move":
        add(path, remove(parse(op.from)));
        break;
      case "copy":
        add(path, structuredClone(get(parse(op.from))));
        break;
      case "test":
        if (JSON.stringify(get(path)) !== JSON.stringify(op.value)) {
          throw invalid(`test operation failed at ${JSON.stringify(op.path)}`);
        }
        break;
      default:
        throw invalid(`unknown JSON patch operation ${JSON.stringify(op.op)}`);
    }
  }
  return doc;
}

/**
 * The merge keys of the built-in types' lists that merge by key (`patchMergeKey`), by field name:
 * a table, not the OpenAPI schema, but right for every list these tests touch.
 */
export function mergeKeyOf(field: string, elements: unknown[]): string | undefined {
  switch (field) {
    case "containers":
    case "initContainers":
    case "ephemeralContainers":
    case "volumes":
    case "env":
    case "imagePullSecrets":
    case "resourceClaims":
      return "name";
    case "volumeMounts":
      return "mountPath";
    case "volumeDevices":
      return "devicePath";
    case "conditions":
      return "type";
    case "ownerReferences":
      return "uid";
    case "hostAliases":
      return "ip";
    case "topologySpreadConstraints":
      return "topologyKey";
    case "ports":
      return elements.some((e) => isObject(e) && "containerPort" in e) ? "containerPort" : "port";
    default:
      return undefined;
  }
}

/** Lists of scalars that merge as sets (`patchStrategy: merge`). */
const MERGED_SCALAR_LISTS = new Set(["finalizers"]);

/**
 * Strategic merge patch, as kubectl sends it: maps merged, `null` deletes, lists with a merge key
 * merged element by element (`$patch: delete` removes one, `$patch: replace` replaces the list),
 * `$setElementOrder/<list>` orders the result, `$deleteFromPrimitiveList/<list>`, `$retainKeys`.
 */
export function strategicMergePatch(original: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return structuredClone(patch);
  if (patch.$patch === "replace") {
    const { $patch: _, ...rest } = patch;
    return structuredClone(rest);
  }
  if (patch.$patch === "delete") return undefined;
  let result: JsonObject = isObject(original) ? structuredClone(original) : {};
  if (Array.isArray(patch.$retainKeys)) {
    const keep = new Set(patch.$retainKeys as string[]);
    result = Object.fromEntries(Object.entries(result).filter(([k]) => keep.has(k)));
  }
  const orders: [string, Json[]][] = [];
  for (const [key, value] of Object.entries(patch)) {
    if (key === "$patch" || key === "$retainKeys") continue;
    if (key.startsWith("$setElementOrder/")) {
      orders.push([key.slice("$setElementOrder/".length), value as Json[]]);
      continue;
    }
    if (key.startsWith("$deleteFromPrimitiveList/")) {
      const field = key.slice("$deleteFromPrimitiveList/".length);
      const drop = new Set((value as Json[]).map((v) => JSON.stringify(v)));
      if (Array.isArray(result[field])) {
        result[field] = (result[field] as Json[]).filter((v) => !drop.has(JSON.stringify(v)));
      }
      continue;
    }
    if (value === null) {
      delete result[key];
    } else if (Array.isArray(value)) {
      result[key] = mergeList(key, result[key], value);
    } else if (isObject(value)) {
      const merged = strategicMergePatch(result[key], value);
      if (merged === undefined) delete result[key];
      else result[key] = merged as Json;
    } else {
      result[key] = value;
    }
  }
  for (const [field, order] of orders) {
    const list = result[field];
    if (!Array.isArray(list)) continue;
    const mergeKey = mergeKeyOf(field, list);
    const id = (v: Json) => JSON.stringify(mergeKey && isObject(v) ? v[mergeKey] : v);
    const rank = new Map(order.map((v, i) => [id(v), i]));
    result[field] = [...list].sort(
      (a, b) => (rank.get(id(a)) ?? order.length) - (rank.get(id(b)) ?? order.length),
    );
  }
  return result;
}

function mergeList(field: string, original: Json | undefined, patch: Json[]): Json[] {
  const current = Array.isArray(original) ? original : [];
  if (patch.some((e) => isObject(e) && e.$patch === "replace")) {
    return patch.filter((e) => !(isObject(e) && e.$patch === "replace")).map((e) => structuredClone(e));
  }
  if (MERGED_SCALAR_LISTS.has(field)) {
    const seen = new Set(current.map((v) => JSON.stringify(v)));
    return [...current, ...patch.filter((v) => !seen.has(JSON.stringify(v)))];
  }
  const mergeKey = mergeKeyOf(field, [...current, ...patch]);
  if (!mergeKey || !patch.every(isObject)) return structuredClone(patch);
  const result = structuredClone(current);
  for (const element of patch as JsonObject[]) {
    const index = result.findIndex((e) => isObject(e) && e[mergeKey] === element[mergeKey]);
    if (element.$patch === "delete") {
      if (index >= 0) result.splice(index, 1);
    } else if (index >= 0) {
      result[index] = strategicMergePatch(result[index], element) as Json;
    } else {
      result.push(strategicMergePatch({}, element) as Json);
    }
  }
  return result;
}
