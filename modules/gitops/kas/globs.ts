// Which files of a manifest project an agent gets: its path globs, with GitLab's semantics
// (doublestar: `*` within one directory, `**` across directories, `{a,b}` alternatives), matched
// with picomatch. A leading "/" anchors at the project's root, as GitLab's documentation writes
// globs (`/**/*.{yaml,yml,json}`): globs are relative to the root either way. Hidden files and
// everything in hidden directories (a path component starting with ".", e.g. `.gitlab/`) are never sent.
import picomatch from "picomatch";

/** Why `glob` cannot be used, or undefined. */
export function globProblem(glob: string): string | undefined {
  if (glob === "") return "is empty";
  if (glob.length > 1024) return "is longer than 1024 characters";
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
  const matches = picomatch(globs.map((g) => g.replace(/^\/+/, "")));
  return files.filter((f) => !isHidden(f.path) && matches(f.path));
}
