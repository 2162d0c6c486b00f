import { execFileSync } from "node:child_process";
import { readFileSync, realpathSync } from "node:fs";
import { dirname, join } from "node:path";

/** This project's version, from its package.json (found upwards from here: the sources or dist/). */
export const VERSION: string = packageJson()?.version ?? "unknown";

/**
 * kas's User-Agent toward GitLab, in GitLab's kas form `gitlab-kas/<version>/<commit>`
 * (`kasServerName()` in the reference), so GitLab's logs tell kas's requests apart.
 */
export function kasUserAgent(): string {
  return `gitlab-kas/${VERSION}/${commitId() || "unknown"}`;
}

/**
 * The commit this build came from (GitLab's `commit_id`, and kas's User-Agent), or "" when unknown:
 * the image bakes it in (`--build-arg GIT_COMMIT=...` sets GITLAB_AGENT_COMMIT); run from a
 * checkout of this project, its HEAD. Read once, when first asked (running git is not free).
 */
export function commitId(): string {
  commit ??= findCommitId(process.env.GITLAB_AGENT_COMMIT || undefined);
  return commit;
}
let commit: string | undefined;

function findCommitId(baked: string | undefined): string {
  if (baked !== undefined) return /^[0-9a-f]{7,64}$/.test(baked) ? baked : "";
  const root = packageRoot(import.meta.dirname);
  if (root === undefined) return "";
  try {
    const [top, head] = execFileSync("git", ["rev-parse", "--show-toplevel", "HEAD"], {
      cwd: root,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
      timeout: 5000,
    }).split("\n");
    // Only this project's own checkout: not a repository it happens to be installed in.
    return top !== undefined &&
      realpathSync(top) === realpathSync(root) &&
      /^[0-9a-f]{40,64}$/.test(head ?? "")
      ? head!
      : "";
  } catch {
    return ""; // no git, or not a checkout
  }
}

/** The folder of this project's package.json, found upwards from `from`. */
function packageRoot(from: string): string | undefined {
  return packageJson(from)?.dir;
}

/** This project's package.json (its folder and version), found upwards from `from`. */
function packageJson(from = import.meta.dirname): { dir: string; version?: string } | undefined {
  for (let dir = from; ; dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === "gitlab-agent-ts")
        return { dir, ...(typeof pkg.version === "string" && { version: pkg.version }) };
    } catch {
      // no package.json here: keep looking
    }
    if (dirname(dir) === dir) return undefined;
  }
}
