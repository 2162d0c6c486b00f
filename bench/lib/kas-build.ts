// kas as operators run it (the `kas` bin): compiled JavaScript, not the sources under tsx, whose
// keep-names helper gives every closure its own property dictionary (kilobytes per tunnel) and
// costs a defineProperty each time one is made.
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { join } from "node:path";

const ROOT = join(import.meta.dirname, "../..");

/** Compiles the project (tsc -p tsconfig.build.json) and answers kas's entry point in it. */
export function buildKas(log: (line: string) => void): string {
  log("building kas (tsc -p tsconfig.build.json)");
  execFileSync(
    process.execPath,
    [createRequire(import.meta.url).resolve("typescript/bin/tsc"), "-p", "tsconfig.build.json"],
    {
      cwd: ROOT,
      stdio: ["ignore", process.stderr, "inherit"], // stdout stays for --json
    },
  );
  return join(ROOT, "dist/cmd/kas/main.js");
}
