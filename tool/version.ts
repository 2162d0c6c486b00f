import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";

interface BuildInfo {
  version: string;
  commit: string;
}

const BUILD: BuildInfo = findBuild(import.meta.dirname);

/** This project's version, from its package.json (found upwards from here: the sources or dist/). */
export const VERSION: string = BUILD.version;

/**
 * The commit this build was made from: package.json's `gitCommit` (a build may stamp it), else
 * the environment's `GITLAB_AGENT_COMMIT` (the image sets it from its GIT_COMMIT build argument),
 * else "unknown" (a checkout run from source).
 */
export const COMMIT: string = BUILD.commit;

/**
 * kas's User-Agent toward GitLab, in GitLab's kas form `gitlab-kas/<version>/<commit>`
 * (`kasServerName()` in the reference), so GitLab's logs tell kas's requests apart.
 */
export const KAS_USER_AGENT = `gitlab-kas/${VERSION}/${COMMIT}`;

function findBuild(from: string): BuildInfo {
  const envCommit = process.env.GITLAB_AGENT_COMMIT;
  for (let dir = from; ; dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
        name?: string;
        version?: string;
        gitCommit?: string;
      };
      if (pkg.name === "gitlab-agent-ts" && typeof pkg.version === "string")
        return { version: pkg.version, commit: pkg.gitCommit || envCommit || "unknown" };
    } catch {
      // no package.json here: keep looking
    }
    if (dirname(dir) === dir) return { version: "unknown", commit: envCommit || "unknown" };
  }
}
