// From zod's issues to ours: one issue per problem, with the YAML path and, when a document is
// at hand, the line and column of the field.
import type { LineCounter } from "yaml";
import { type Document, isAlias, isMap, isScalar, isSeq, type Node } from "yaml";
import type { z } from "zod";
import { type AgentConfigurationIssue, formatPath } from "./errors.ts";

export interface SourceMap {
  doc: Document;
  lineCounter: LineCounter;
}

export function fromZodIssues(
  issues: readonly z.core.$ZodIssue[],
  source?: SourceMap,
): AgentConfigurationIssue[] {
  const out: AgentConfigurationIssue[] = [];
  for (const issue of issues) {
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) {
        const path = [...issue.path, key];
        out.push(
          withPosition({ path: formatPath(path), message: `unknown key "${key}"` }, path, true, source),
        );
      }
    } else {
      out.push(
        withPosition({ path: formatPath(issue.path), message: messageOf(issue) }, issue.path, false, source),
      );
    }
  }
  return out;
}

// YAML 1.1 (as GitLab reads it) makes `yes`, `on`, `y`, `1.0`, `0x10` booleans or numbers.
const UNQUOTED = /received (boolean|number)$/;

function messageOf(issue: z.core.$ZodIssue): string {
  const scalar = issue.code === "invalid_type" && issue.expected === "string" && UNQUOTED.exec(issue.message);
  return scalar
    ? `${issue.message} (YAML reads the unquoted value as a ${scalar[1]}: quote it)`
    : issue.message;
}

function withPosition(
  issue: AgentConfigurationIssue,
  path: readonly PropertyKey[],
  atKey: boolean,
  source: SourceMap | undefined,
): AgentConfigurationIssue {
  if (!source) return issue;
  const offset = offsetOf(source.doc, path, atKey);
  if (offset === undefined) return issue;
  const { line, col } = source.lineCounter.linePos(offset);
  return { ...issue, line, column: col };
}

/**
 * Where `path` is in the document: the value's start (or its key's, for an unknown key). When the
 * field is absent (a missing required key), the nearest present parent's key.
 */
function offsetOf(doc: Document, path: readonly PropertyKey[], atKey: boolean): number | undefined {
  let node: unknown = doc.contents;
  let best: number | undefined = rangeStart(node);
  for (const [i, seg] of path.entries()) {
    node = resolveAlias(doc, node);
    const last = i === path.length - 1;
    if (isMap(node)) {
      const pair = node.items.find((p) => keyText(p.key) === String(seg));
      if (!pair) return best;
      const keyAt = rangeStart(pair.key);
      const valueAt = rangeStart(pair.value);
      // An empty value (`prune:`) has no useful position of its own: point at the key.
      best = (last && !atKey ? (valueAt ?? keyAt) : keyAt) ?? best;
      node = pair.value;
    } else if (isSeq(node) && typeof seg === "number") {
      const item = node.items[seg];
      if (item === undefined) return best;
      best = rangeStart(item) ?? best;
      node = item;
    } else {
      return best;
    }
  }
  return best;
}

/** The YAML path of the deepest node holding `offset`, e.g. for a duplicate key's error. */
export function pathAt(doc: Document, offset: number): PropertyKey[] {
  const path: PropertyKey[] = [];
  let node: unknown = doc.contents;
  for (;;) {
    // A value's range leaves out its tag and anchor (`level: !!int debug`), where an error about
    // the tag points: the gap before a value belongs to it.
    if (isMap(node)) {
      const pair = node.items.find(
        (p) => contains(p.key, offset) || contains(p.value, offset, rangeEnd(p.key)),
      );
      if (!pair) return path;
      path.push(keyText(pair.key));
      if (contains(pair.key, offset)) return path;
      node = pair.value;
    } else if (isSeq(node)) {
      const items = node.items;
      const index = items.findIndex((item, i) =>
        contains(item, offset, i > 0 ? rangeEnd(items[i - 1]) : undefined),
      );
      if (index < 0) return path;
      path.push(index);
      node = node.items[index];
    } else {
      return path;
    }
  }
}

function keyText(key: unknown): string {
  return isScalar(key) ? String(key.value) : String(key);
}

function resolveAlias(doc: Document, node: unknown): unknown {
  return isAlias(node) ? node.resolve(doc) : node;
}

function rangeStart(node: unknown): number | undefined {
  return (node as Node | null | undefined)?.range?.[0];
}

function rangeEnd(node: unknown): number | undefined {
  return (node as Node | null | undefined)?.range?.[2];
}

/** Whether `offset` lies in the node, or from `from` (where what comes before it ends) on. */
function contains(node: unknown, offset: number, from?: number): boolean {
  const range = (node as Node | null | undefined)?.range;
  return (
    range !== undefined &&
    range !== null &&
    offset >= Math.min(range[0], from ?? range[0]) &&
    offset < range[2]
  );
}
