// Checks on the names kas passes to git. Branch and tag names, commit ids and paths come from
// agent configuration (untrusted): each is checked here before it reaches a git argument or a
// `cat-file --batch-check` line, so none can become an option or a different revision expression.
import { RepositoryError } from "../../../modules/runtime/repositories.ts";

const invalid = (message: string): RepositoryError => new RepositoryError("failed", message);

/** Why `name` is not a branch or tag name git accepts (`git check-ref-format`'s rules), or undefined. */
export function refNameProblem(name: string): string | undefined {
  if (name === "") return "is empty";
  // Names starting with "-" are refused by `git check-ref-format --branch` too: they read as options.
  if (name.startsWith("-")) return 'starts with "-"';
  if (name === "HEAD" || name === "@") return `is "${name}"`;
  if (name.includes("..")) return 'contains ".."';
  if (name.includes("@{")) return 'contains "@{"';
  // Control characters (and DEL), space and the characters revision syntax uses.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  const bad = /[\x00-\x20\x7f~^:?*[\\]/.exec(name);
  if (bad) return `contains ${JSON.stringify(bad[0])}`;
  if (name.startsWith("/") || name.endsWith("/") || name.includes("//")) return "has an empty path component";
  if (name.endsWith(".")) return 'ends with "."';
  for (const part of name.split("/")) {
    if (part.startsWith(".")) return 'has a component starting with "."';
    if (part.endsWith(".lock")) return 'has a component ending with ".lock"';
  }
  return undefined;
}

/** `name` when it is a valid branch/tag name, else a RepositoryError naming the problem. */
export function checkRefName(kind: "branch" | "tag", name: string): string {
  const problem = refNameProblem(name);
  if (problem) throw invalid(`invalid ${kind} name ${JSON.stringify(name)}: ${problem}`);
  return name;
}

/** A full object id: 40 hex digits (SHA-1) or 64 (SHA-256). Returned lower-case. */
export function checkCommitId(id: string): string {
  if (!/^(?:[0-9a-fA-F]{40}|[0-9a-fA-F]{64})$/.test(id)) {
    throw invalid(`invalid commit id ${JSON.stringify(id)}: expected a full hex object id`);
  }
  return id.toLowerCase();
}

/**
 * A path inside a tree, '/'-separated from the root: no leading slash, no empty, "." or ".."
 * components (git would resolve those against the current directory), no NUL or line feed (they
 * would end a `--batch-check` line). `dir` allows "" (the root) and drops one trailing slash.
 */
export function checkTreePath(path: string, kind: "file" | "dir"): string {
  if (kind === "dir" && path.endsWith("/")) path = path.slice(0, -1);
  if (kind === "dir" && path === "") return "";
  const problem =
    path === ""
      ? "is empty"
      : /[\0\n]/.test(path)
        ? "contains NUL or a line feed"
        : path.split("/").some((part) => part === "" || part === "." || part === "..")
          ? 'has an empty, "." or ".." component'
          : undefined;
  if (problem) throw invalid(`invalid ${kind} path ${JSON.stringify(path)}: ${problem}`);
  return path;
}
