// Which files of a manifest project an agent gets: its path globs, with GitLab's semantics
// (doublestar: `*` within one directory, `**` across directories, `{a,b}` alternatives), matched by
// Node's own glob matcher (`path.posix.matchesGlob`). Hidden files and everything in hidden
// directories (a path component starting with ".", e.g. `.gitlab/`) are never sent.
import { posix } from "node:path";

/** Why `glob` cannot be used, or undefined. */
export function globProblem(glob: string): string | undefined {
  if (glob === "") return "is empty";
  if (glob.length > 1024) return "is longer than 1024 characters";
  if (glob.startsWith("/")) return "is absolute (globs are relative to the project's root)";
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (/[\x00-\x1f\x7f]/.test(glob)) return "contains control characters";
  if (glob.split("/").some((part) => part === "..")) return 'has a ".." component';
  return undefined;
}

/** A path with a component starting with "." (a hidden file, or one in a hidden directory). */
export function isHidden(path: string): boolean {
  return path.split("/").some((part) => part.startsWith("."));
}

/** The files (paths from the root) that any of `globs` matches, hidden ones left out, in the order given. */
export function matchingFiles<T extends { path: string }>(
  files: readonly T[],
  globs: readonly string[],
): T[] {
  return files.filter((f) => !isHidden(f.path) && globs.some((g) => posix.matchesGlob(f.path, g)));
}
