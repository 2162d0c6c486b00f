// Server-side apply over a field-ownership model of leaf paths, as the real server's structured
// merge diff does it in the essentials: every manager owns a set of fields (`managedFields`,
// FieldsV1), an apply sets the fields of its configuration and removes those it no longer
// names (unless another manager owns them too), a field another manager owns with a different
// value is a conflict (409, unless forced, which takes it over), and a plain write (create,
// update, patch) takes over the fields it changed.
import { mergeKeyOf } from "./patch.ts";
import {
  deepEqual,
  type KubeObject,
  type ManagedFieldsEntry,
  now,
  type StatusCause,
  StoreError,
} from "./store.ts";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };
const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);

/** A field path: `f:<field>`, `k:<json of the merge key>` (an element of a keyed list), and `.` (the element itself). */
type Path = string[];

/** Metadata the server owns; nobody manages it. */
const UNMANAGED_METADATA = new Set([
  "name",
  "namespace",
  "uid",
  "resourceVersion",
  "generation",
  "creationTimestamp",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
  "managedFields",
  "selfLink",
  "generateName",
]);

export interface FieldScope {
  /** Custom resources: lists are atomic (no schema says otherwise). */
  custom: boolean;
  /** `status` when written through the status subresource: only status fields count. */
  subresource?: string;
  /** Whether status is written only through the subresource (then the main resource ignores it). */
  statusSubresource: boolean;
}

/** The leaf paths set in an object (its managed fields, were one manager to own all of it). */
export function fieldSet(object: KubeObject, scope: FieldScope): Map<string, Path> {
  const out = new Map<string, Path>();
  const add = (path: Path) => out.set(JSON.stringify(path), path);
  const walk = (value: Json, path: Path, field: string | undefined) => {
    // An empty map or keyed list owns nothing beneath it (as structured merge diff has it).
    if (isObject(value)) {
      for (const [k, v] of Object.entries(value)) {
        if (v === undefined) continue;
        walk(v, [...path, `f:${k}`], k);
      }
    } else if (Array.isArray(value) && field !== undefined && !scope.custom) {
      const key = mergeKeyOf(field, value);
      if (key && value.every((e) => isObject(e) && e[key] !== undefined)) {
        for (const element of value as JsonObject[]) {
          const segment = `k:${JSON.stringify({ [key]: element[key] })}`;
          add([...path, segment, "."]);
          walk(element, [...path, segment], undefined);
        }
        return;
      }
      add(path);
    } else {
      add(path);
    }
  };
  for (const [k, v] of Object.entries(object)) {
    if (k === "apiVersion" || k === "kind" || v === undefined) continue;
    if (k === "status" && scope.subresource !== "status" && scope.statusSubresource) continue;
    if (k !== "status" && scope.subresource === "status") continue;
    if (k === "metadata" && isObject(v)) {
      for (const [mk, mv] of Object.entries(v)) {
        if (!UNMANAGED_METADATA.has(mk) && mv !== undefined) walk(mv, ["f:metadata", `f:${mk}`], mk);
      }
      continue;
    }
    walk(v as Json, [`f:${k}`], k);
  }
  return out;
}

/** FieldsV1: `{"f:spec":{"f:replicas":{}}}`, a trie of the paths. */
export function toFieldsV1(paths: Iterable<Path>): JsonObject {
  const root: JsonObject = {};
  for (const path of paths) {
    let node = root;
    for (const segment of path) {
      if (!isObject(node[segment])) node[segment] = {};
      node = node[segment] as JsonObject;
    }
  }
  return root;
}

export function fromFieldsV1(fields: unknown): Map<string, Path> {
  const out = new Map<string, Path>();
  const walk = (node: unknown, path: Path) => {
    const entries = isObject(node) ? Object.entries(node) : [];
    if (entries.length === 0 && path.length > 0) out.set(JSON.stringify(path), path);
    for (const [segment, child] of entries) walk(child, [...path, segment]);
  };
  walk(fields, []);
  return out;
}

/** The value at a field path, or undefined. */
function valueAt(object: unknown, path: Path): unknown {
  let node: unknown = object;
  for (const segment of path) {
    if (segment === ".") return node;
    if (segment.startsWith("f:")) {
      node = isObject(node) ? node[segment.slice(2)] : undefined;
    } else if (segment.startsWith("k:")) {
      const key = JSON.parse(segment.slice(2)) as JsonObject;
      node = Array.isArray(node)
        ? node.find((e) => isObject(e) && Object.entries(key).every(([k, v]) => deepEqual(e[k], v)))
        : undefined;
    } else return undefined;
    if (node === undefined) return undefined;
  }
  return node;
}

/** Removes the field at a path (an element for `.`); empty maps left behind go too. */
function removeAt(object: JsonObject, path: Path): void {
  const element = path.at(-1) === ".";
  const target = element ? path.slice(0, -1) : path;
  const parents: [Json, string][] = [];
  let node: Json = object;
  for (const segment of target.slice(0, -1)) {
    const next = valueAt(node, [segment]) as Json | undefined;
    if (next === undefined) return;
    parents.push([node, segment]);
    node = next;
  }
  const last = target.at(-1)!;
  if (last.startsWith("f:") && isObject(node)) delete node[last.slice(2)];
  else if (last.startsWith("k:") && Array.isArray(node)) {
    const found = valueAt(node, [last]);
    const index = node.indexOf(found as Json);
    if (index >= 0) node.splice(index, 1);
  }
  // Prune maps the removal emptied (never the top-level ones).
  for (let i = parents.length - 1; i >= 1; i--) {
    const [parent, segment] = parents[i]!;
    const child = valueAt(parent, [segment]);
    if (isObject(child) && Object.keys(child).length === 0 && isObject(parent) && segment.startsWith("f:")) {
      delete parent[segment.slice(2)];
    } else break;
  }
}

/** Merges an applied configuration into an object: maps field by field, keyed lists element by element. */
function mergeApplied(
  target: Json | undefined,
  applied: Json,
  field: string | undefined,
  custom: boolean,
): Json {
  if (isObject(applied)) {
    const out: JsonObject = isObject(target) ? { ...target } : {};
    for (const [k, v] of Object.entries(applied)) out[k] = mergeApplied(out[k], v, k, custom);
    return out;
  }
  if (Array.isArray(applied) && Array.isArray(target) && field !== undefined && !custom) {
    const key = mergeKeyOf(field, applied);
    if (key && applied.every((e) => isObject(e) && e[key] !== undefined)) {
      const out = [...target];
      for (const element of applied as JsonObject[]) {
        const index = out.findIndex((e) => isObject(e) && deepEqual(e[key], element[key]));
        if (index >= 0) out[index] = mergeApplied(out[index], element, undefined, custom);
        else out.push(structuredClone(element));
      }
      return out;
    }
  }
  return structuredClone(applied);
}

/** `.spec.template.spec.containers[name="nginx"].image`: a path as the real server's messages write it. */
export function pathString(path: Path): string {
  let out = "";
  for (const segment of path) {
    if (segment === ".") continue;
    if (segment.startsWith("f:")) out += `.${segment.slice(2)}`;
    else if (segment.startsWith("k:")) {
      const key = JSON.parse(segment.slice(2)) as JsonObject;
      out += `[${Object.entries(key)
        .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
        .join(",")}]`;
    }
  }
  return out;
}

const related = (a: Path, b: Path) => {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return false;
  return true;
};

function entryOf(
  manager: string,
  operation: "Apply" | "Update",
  apiVersion: string,
  paths: Iterable<Path>,
  subresource?: string,
): ManagedFieldsEntry {
  return {
    manager,
    operation,
    apiVersion,
    time: now(),
    fieldsType: "FieldsV1",
    fieldsV1: toFieldsV1(paths),
    ...(subresource && { subresource }),
  };
}

const sameOwner = (
  e: ManagedFieldsEntry,
  manager: string,
  operation: string,
  subresource: string | undefined,
) => e.manager === manager && e.operation === operation && (e.subresource ?? "") === (subresource ?? "");

/**
 * Server-side apply of `applied` (the configuration as sent) by `manager` onto `current`
 * (undefined: the object does not exist yet). The new object, its managedFields set; or a 409
 * Conflict naming each field another manager owns with another value (unless `force`).
 */
export function serverSideApply(
  current: KubeObject | undefined,
  applied: KubeObject,
  manager: string,
  force: boolean,
  scope: FieldScope,
): KubeObject {
  const appliedFields = fieldSet(applied, scope);
  const entries = structuredClone(current?.metadata.managedFields ?? []);
  const conflicts: { manager: string; operation: string; apiVersion: string; path: Path }[] = [];
  const others = entries.filter((e) => !sameOwner(e, manager, "Apply", scope.subresource));
  const owned = new Map(others.map((e) => [e, fromFieldsV1(e.fieldsV1)]));
  for (const path of appliedFields.values()) {
    if (path.at(-1) === ".") continue;
    for (const [entry, fields] of owned) {
      for (const theirs of fields.values()) {
        if (theirs.at(-1) === "." || !related(path, theirs)) continue;
        const shorter = path.length <= theirs.length ? path : theirs;
        if (!deepEqual(valueAt(current, shorter), valueAt(applied, shorter))) {
          conflicts.push({
            manager: entry.manager,
            operation: entry.operation,
            apiVersion: entry.apiVersion,
            path: theirs,
          });
        }
      }
    }
  }
  if (conflicts.length > 0 && !force) {
    const who = (c: (typeof conflicts)[number]) =>
      `conflict with "${c.manager}"${c.operation === "Update" ? ` using ${c.apiVersion}` : ""}`;
    const causes: StatusCause[] = conflicts.map((c) => ({
      type: "FieldManagerConflict",
      message: who(c),
      field: pathString(c.path),
    }));
    const lines = conflicts.map((c) => `${who(c)}: ${pathString(c.path)}`);
    const message =
      conflicts.length === 1
        ? `Apply failed with 1 conflict: ${lines[0]}`
        : `Apply failed with ${conflicts.length} conflicts: ${lines.join("\n")}`;
    throw new StoreError(409, "Conflict", message, {
      name: applied.metadata.name,
      kind: applied.kind,
      causes,
    });
  }
  // Forced: the conflicting fields leave their owners.
  for (const c of conflicts) {
    for (const [entry, fields] of owned)
      if (entry.manager === c.manager && entry.operation === c.operation)
        fields.delete(JSON.stringify(c.path));
  }
  const mine = entries.find((e) => sameOwner(e, manager, "Apply", scope.subresource));
  const before = mine ? fromFieldsV1(mine.fieldsV1) : new Map<string, Path>();
  let next = structuredClone(
    (current ?? { ...applied, metadata: { ...applied.metadata } }) as unknown as JsonObject,
  );
  // Fields this manager applied before and now leaves out go, unless someone else owns them.
  const ownedByOthers = [...owned.values()].flatMap((fields) => [...fields.values()]);
  const element = (p: Path) => (p.at(-1) === "." ? p.slice(0, -1) : p);
  const dropped = [...before.entries()]
    .filter(([k]) => !appliedFields.has(k))
    .map(([, p]) => p)
    .filter((p) => !ownedByOthers.some((q) => related(element(p), q)))
    .sort((a, b) => b.length - a.length);
  for (const path of dropped) removeAt(next, path);
  const { metadata: appliedMetadata, ...appliedRest } = applied as unknown as JsonObject & {
    metadata: JsonObject;
  };
  const managedMetadata = Object.fromEntries(
    Object.entries(appliedMetadata).filter(([k]) => !UNMANAGED_METADATA.has(k)),
  );
  next = mergeApplied(
    next,
    { ...appliedRest, metadata: managedMetadata } as JsonObject,
    undefined,
    scope.custom,
  ) as JsonObject;
  const apiVersion = applied.apiVersion;
  const result: ManagedFieldsEntry[] = [];
  for (const e of entries) {
    if (e === mine) continue;
    const fields = owned.get(e);
    if (fields && fields.size > 0) result.push({ ...e, fieldsV1: toFieldsV1(fields.values()) });
  }
  result.unshift(entryOf(manager, "Apply", apiVersion, appliedFields.values(), scope.subresource));
  const out = next as unknown as KubeObject;
  out.metadata.managedFields = result;
  return out;
}

/**
 * A plain write (create, update, patch) by `manager`: it owns what it changed; what it changed
 * leaves the other managers; fields gone from the object leave everyone.
 */
export function recordUpdate(
  previous: KubeObject | undefined,
  next: KubeObject,
  manager: string,
  scope: FieldScope,
): ManagedFieldsEntry[] {
  const after = fieldSet(next, scope);
  const changed = new Map<string, Path>();
  for (const [k, p] of after) {
    if (previous === undefined || !deepEqual(valueAt(previous, p), valueAt(next, p))) changed.set(k, p);
  }
  const everything = fieldSet(next, { ...scope, subresource: "status", statusSubresource: false });
  const all = new Map([
    ...everything,
    ...fieldSet(next, { ...scope, subresource: undefined, statusSubresource: false }),
  ]);
  const entries = structuredClone(previous?.metadata.managedFields ?? []);
  const result: ManagedFieldsEntry[] = [];
  let mine: Map<string, Path> = new Map();
  for (const e of entries) {
    const fields = fromFieldsV1(e.fieldsV1);
    for (const k of [...fields.keys()]) if (!all.has(k)) fields.delete(k);
    if (sameOwner(e, manager, "Update", scope.subresource)) {
      mine = fields;
      continue;
    }
    for (const k of changed.keys()) fields.delete(k);
    if (fields.size > 0) result.push({ ...e, fieldsV1: toFieldsV1(fields.values()) });
  }
  for (const [k, p] of changed) mine.set(k, p);
  if (mine.size > 0)
    result.push(entryOf(manager, "Update", next.apiVersion, mine.values(), scope.subresource));
  return result;
}
