// The documentation's links lead somewhere: every relative link in a tracked Markdown file names a
// file or folder of the repository (and, with a #fragment into a Markdown file, one of its
// headings), and the README links only inside the repository, so that a clone has all it names.
// The generated API reference's links into its own pages are its generator's (typedoc-plugin-markdown
// numbers some anchors of re-exported types, "#headererrorcode-1"): only their files are checked.
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { promisify } from "node:util";
import { expect, test } from "vitest";

const ROOT = new URL("../..", import.meta.url).pathname;

/** Inline links and images, `[text](target "title")`, outside code blocks and code spans. */
function links(markdown: string): string[] {
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, "").replace(/`[^`\n]*`/g, "code");
  return [...prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!);
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

function anchors(file: string): Set<string> {
  const text = readFileSync(file, "utf8").replace(/^```[\s\S]*?^```/gm, "");
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, heading] of text.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = slug(heading!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

const isExternal = (target: string) => /^[a-z][a-z0-9+.-]*:/i.test(target);

test("every relative link in the repository's Markdown resolves", async () => {
  const { stdout } = await promisify(execFile)("git", ["ls-files", "-z", "--", "*.md"], { cwd: ROOT });
  const files = stdout.split("\0").filter((f) => f && existsSync(join(ROOT, f)));
  expect(files).toContain("README.md");
  const broken: string[] = [];
  for (const file of files) {
    const path = join(ROOT, file);
    const generated = file.startsWith("packages/tunnel/api/");
    for (const target of links(readFileSync(path, "utf8"))) {
      if (isExternal(target)) continue;
      const [pathPart, fragment] = target.split("#", 2) as [string, string | undefined];
      const resolved = pathPart ? join(dirname(path), decodeURIComponent(pathPart)) : path;
      if (!existsSync(resolved)) broken.push(`${file}: ${target} (no such file)`);
      else if (fragment && !generated && resolved.endsWith(".md") && !anchors(resolved).has(fragment))
        broken.push(`${file}: ${target} (no such heading)`);
    }
  }
  expect(broken).toEqual([]);
});

test("the README links only inside the repository", () => {
  const targets = links(readFileSync(join(ROOT, "README.md"), "utf8"));
  expect(targets.length).toBeGreaterThan(0);
  const outside = targets.filter((t) => isExternal(t) || relative(ROOT, join(ROOT, t)).startsWith(".."));
  expect(outside).toEqual([]);
});
