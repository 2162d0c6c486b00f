import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";

/** This project's version, from its package.json (found upwards from here: the sources or dist/). */
export const VERSION: string = findVersion(import.meta.dirname);

function findVersion(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === "gitlab-agent-ts" && typeof pkg.version === "string") return pkg.version;
    } catch {
      // no package.json here: keep looking
    }
    if (dirname(dir) === dir) return "unknown";
  }
}
