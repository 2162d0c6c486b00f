// Parsers for the git output the local backend reads. Each throws a GitOutputError (and nothing
// else) on output it does not understand, so a surprise from git becomes a clear "failed" error.

/** Output git printed that does not have the expected shape. */
export class GitOutputError extends Error {
  override name = "GitOutputError";
}

const OID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
const OBJECT_TYPES = new Set(["blob", "tree", "commit", "tag"]);
const fail = (what: string, detail: string): never => {
  throw new GitOutputError(`unexpected ${what} output: ${detail}`);
};
const show = (s: string): string => JSON.stringify(s.length > 80 ? `${s.slice(0, 80)}...` : s);

export interface LsTreeEntry {
  readonly mode: string;
  readonly type: "blob" | "tree" | "commit";
  readonly oid: string;
  readonly path: string;
}

// Paths are bytes to git; one that is not UTF-8 cannot be named back through the string API.
const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * `git ls-tree -z` output: `<mode> SP <type> SP <oid> TAB <path> NUL` per entry. Entries whose path
 * is not valid UTF-8 are skipped (they could not be read back by path).
 */
export function parseLsTree(out: Buffer): LsTreeEntry[] {
  const entries: LsTreeEntry[] = [];
  let start = 0;
  while (start < out.length) {
    const end = out.indexOf(0, start);
    if (end < 0) fail("ls-tree", "last entry is not NUL-terminated");
    const tab = out.indexOf(0x09, start);
    if (tab < 0 || tab > end)
      fail("ls-tree", `no tab in ${show(out.subarray(start, end).toString("latin1"))}`);
    const head = out.subarray(start, tab).toString("latin1");
    const [mode, type, oid, extra] = head.split(" ");
    if (extra !== undefined || !mode || !/^[0-7]{6}$/.test(mode)) fail("ls-tree", `bad entry ${show(head)}`);
    if (type !== "blob" && type !== "tree" && type !== "commit") fail("ls-tree", `bad type in ${show(head)}`);
    if (!oid || !OID.test(oid)) fail("ls-tree", `bad object id in ${show(head)}`);
    const rawPath = out.subarray(tab + 1, end);
    if (rawPath.length === 0) fail("ls-tree", `empty path in ${show(head)}`);
    start = end + 1;
    let path: string;
    try {
      path = utf8.decode(rawPath);
    } catch {
      continue;
    }
    entries.push({ mode: mode!, type: type as LsTreeEntry["type"], oid: oid!, path });
  }
  return entries;
}

/** One ref from `git for-each-ref --format=` {@link FOR_EACH_REF_FORMAT}. */
export interface RefRecord {
  readonly refname: string;
  readonly oid: string;
  readonly type: "blob" | "tree" | "commit" | "tag";
  /** For an annotated tag: the object it points at (one level: a tag of a tag gives a tag). */
  readonly peeled?: { readonly oid: string; readonly type: "blob" | "tree" | "commit" | "tag" };
}

/** NUL-separated fields (refnames cannot hold NUL or LF), one ref per line. */
export const FOR_EACH_REF_FORMAT =
  "%(refname)%00%(objectname)%00%(objecttype)%00%(*objectname)%00%(*objecttype)";

export function parseForEachRef(out: string): RefRecord[] {
  if (out === "") return [];
  if (!out.endsWith("\n")) fail("for-each-ref", "last line is not terminated");
  return out
    .slice(0, -1)
    .split("\n")
    .map((line) => {
      const fields = line.split("\0");
      if (fields.length !== 5) fail("for-each-ref", `expected 5 fields in ${show(line)}`);
      const [refname, oid, type, peeledOid, peeledType] = fields as [string, string, string, string, string];
      if (!refname.startsWith("refs/")) fail("for-each-ref", `bad ref name ${show(refname)}`);
      if (!OID.test(oid) || !OBJECT_TYPES.has(type)) fail("for-each-ref", `bad object in ${show(line)}`);
      if (peeledOid === "" && peeledType === "") return { refname, oid, type } as RefRecord;
      if (type !== "tag" || !OID.test(peeledOid) || !OBJECT_TYPES.has(peeledType)) {
        fail("for-each-ref", `bad peeled object in ${show(line)}`);
      }
      return { refname, oid, type, peeled: { oid: peeledOid, type: peeledType } } as RefRecord;
    });
}

/** One answer of `git cat-file --batch-check` (default format), in input order. */
export type BatchCheckResult =
  | {
      readonly found: true;
      readonly oid: string;
      readonly type: "blob" | "tree" | "commit" | "tag";
      readonly size: number;
    }
  | { readonly found: false };

/**
 * `git cat-file --batch-check` output for `inputs` (one line each, no LF in them): per input,
 * `<oid> SP <type> SP <size> LF`, or `<input> SP missing LF` (also `ambiguous`).
 */
export function parseBatchCheck(out: string, inputs: readonly string[]): BatchCheckResult[] {
  if (!out.endsWith("\n") && out !== "") fail("cat-file", "last line is not terminated");
  const lines = out === "" ? [] : out.slice(0, -1).split("\n");
  if (lines.length !== inputs.length) fail("cat-file", `${lines.length} lines for ${inputs.length} inputs`);
  return lines.map((line, i) => {
    if (line === `${inputs[i]} missing` || line === `${inputs[i]} ambiguous`) return { found: false };
    const [oid, type, size, extra] = line.split(" ");
    if (extra !== undefined || !oid || !OID.test(oid) || !type || !OBJECT_TYPES.has(type) || !size) {
      return fail("cat-file", `bad line ${show(line)}`);
    }
    if (!/^(?:0|[1-9][0-9]{0,14})$/.test(size)) fail("cat-file", `bad size in ${show(line)}`);
    return { found: true, oid, type: type as "blob", size: Number(size) };
  });
}

/**
 * `git cat-file --batch` output for `expected` blobs (their ids and sizes from `--batch-check`), in
 * input order: per object `<oid> SP blob SP <size> LF <content> LF`. Content is read by its size
 * (it may hold NUL and LF); anything else (a missing object, another size) is an error.
 */
export function parseBatch(
  out: Buffer,
  expected: readonly { readonly oid: string; readonly size: number }[],
): Buffer[] {
  const contents: Buffer[] = [];
  let at = 0;
  for (const { oid, size } of expected) {
    const lf = out.indexOf(0x0a, at);
    if (lf < 0) fail("cat-file", `output ends before the header of ${oid}`);
    const header = out.subarray(at, lf).toString("latin1");
    if (header !== `${oid} blob ${size}`) {
      fail("cat-file", `header ${show(header)} where ${oid} blob ${size} was expected`);
    }
    const end = lf + 1 + size;
    if (end >= out.length || out[end] !== 0x0a) fail("cat-file", `content of ${oid} is cut short`);
    contents.push(out.subarray(lf + 1, end));
    at = end + 1;
  }
  if (at !== out.length) fail("cat-file", `${out.length - at} bytes after the last object`);
  return contents;
}
