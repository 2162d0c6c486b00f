// Where CPU went in a V8 .cpuprofile: self samples summed by function (and by file).
import { readFileSync } from "node:fs";

interface ProfileNode {
  id: number;
  hitCount?: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

/** Logs a profile's top functions and files by self time, under a line naming its `window`. */
export function logSelfTime(log: (line: string) => void, path: string, window: string, top = 15): void {
  const { functions, files } = selfTime(path, top);
  log(`  ${window} CPU profile, self time (% of samples, idle included):`);
  for (const f of functions) log(`    ${f.pct.toFixed(2).padStart(6)} %  ${f.name}`);
  log("  by file:");
  for (const f of files) log(`    ${f.pct.toFixed(2).padStart(6)} %  ${f.name}`);
}

/** The `top` functions and files by self time, as % of all samples (idle included). */
export function selfTime(path: string, top = 15) {
  const { nodes } = JSON.parse(readFileSync(path, "utf8")) as { nodes: ProfileNode[] };
  const total = nodes.reduce((n, x) => n + (x.hitCount ?? 0), 0) || 1;
  const byFn = new Map<string, number>();
  const byFile = new Map<string, number>();
  for (const { hitCount = 0, callFrame: f } of nodes) {
    const file = f.url.replace(/^file:\/\/.*?\/(node_modules|lib|cmd)\//, "$1/") || "(native)";
    const fn = `${f.functionName || "(anonymous)"} ${file}:${f.lineNumber + 1}`;
    byFn.set(fn, (byFn.get(fn) ?? 0) + hitCount);
    byFile.set(file, (byFile.get(file) ?? 0) + hitCount);
  }
  const rank = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, hits]) => ({ name, pct: (hits / total) * 100 }));
  return { functions: rank(byFn), files: rank(byFile) };
}
