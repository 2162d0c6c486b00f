// Manifest files -> Kubernetes objects: multi-document YAML (JSON is YAML), bounded, each problem
// named by its file and document index so the other documents still apply.
import { parseAllDocuments } from "yaml";

/** Aliases a document may expand (a "billion laughs" document expands without bound). */
export const MAX_ALIAS_COUNT = 100;

export interface ManifestObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string> } & Record<
    string,
    unknown
  >;
  [field: string]: unknown;
}

/** An object read from a manifest file, with where it came from. */
export interface ParsedObject {
  object: ManifestObject;
  source: string;
  /** The document's index in its file (0-based; items of a `List` share their document's). */
  document: number;
}

/** A document that could not be read as an object. */
export interface ParseProblem {
  source: string;
  document: number;
  error: string;
}

export interface ParsedManifests {
  objects: ParsedObject[];
  problems: ParseProblem[];
}

/** The group part of an apiVersion ("" for the core group's "v1"). */
export function groupOf(apiVersion: string): string {
  const slash = apiVersion.indexOf("/");
  return slash < 0 ? "" : apiVersion.slice(0, slash);
}

/** Every object of every file, in file order (sources sorted) then document order. */
export function parseManifests(files: ReadonlyMap<string, Uint8Array | string>): ParsedManifests {
  const objects: ParsedObject[] = [];
  const problems: ParseProblem[] = [];
  const sources = [...files.keys()].sort();
  for (const source of sources) {
    const raw = files.get(source)!;
    const text = typeof raw === "string" ? raw : Buffer.from(raw).toString("utf8");
    let documents: ReturnType<typeof parseAllDocuments>;
    try {
      documents = parseAllDocuments(text, { prettyErrors: false });
    } catch (err) {
      problems.push({ source, document: 0, error: `invalid YAML: ${(err as Error).message}` });
      continue;
    }
    const list = Array.isArray(documents) ? documents : [];
    list.forEach((doc, index) => {
      const fail = (error: string) => problems.push({ source, document: index, error });
      if (doc.errors.length > 0) {
        fail(`invalid YAML: ${doc.errors[0]!.message}`);
        return;
      }
      let value: unknown;
      try {
        value = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
      } catch (err) {
        fail(`invalid YAML: ${(err as Error).message}`);
        return;
      }
      if (value === null || value === undefined) return; // an empty document
      const check = (candidate: unknown): ManifestObject | string => {
        if (typeof candidate !== "object" || candidate === null || Array.isArray(candidate)) {
          return "not a Kubernetes object (a YAML map is expected)";
        }
        const o = candidate as Partial<ManifestObject>;
        const missing = [
          typeof o.apiVersion === "string" && o.apiVersion !== "" ? undefined : "apiVersion",
          typeof o.kind === "string" && o.kind !== "" ? undefined : "kind",
          typeof o.metadata?.name === "string" && o.metadata.name !== "" ? undefined : "metadata.name",
        ].filter((m) => m !== undefined);
        if (missing.length > 0) return `object without ${missing.join(", ")}`;
        if (o.metadata!.namespace !== undefined && typeof o.metadata!.namespace !== "string") {
          return "metadata.namespace is not a string";
        }
        return o as ManifestObject;
      };
      // kubectl's `kind: List` (apiVersion v1): its items are objects of their own.
      const asList = value as { apiVersion?: unknown; kind?: unknown; items?: unknown };
      if (asList.apiVersion === "v1" && asList.kind === "List" && Array.isArray(asList.items)) {
        for (const item of asList.items) {
          const checked = check(item);
          if (typeof checked === "string") fail(`List item: ${checked}`);
          else objects.push({ object: checked, source, document: index });
        }
        return;
      }
      const checked = check(value);
      if (typeof checked === "string") fail(checked);
      else objects.push({ object: checked, source, document: index });
    });
  }
  return { objects, problems };
}
