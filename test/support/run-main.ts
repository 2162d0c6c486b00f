import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";

export type MainProcess = ChildProcess & { out: () => string; err: () => string };

/**
 * Runs a daemon's main.ts as its own process (only PATH inherited; kas's proxy on plain HTTP unless
 * `env` says otherwise, so no certificate is made under the home directory), collecting what it prints.
 * `preload`: a module imported before main (a test's way into the daemon).
 */
export function runMain(
  main: string,
  args: string[],
  env: NodeJS.ProcessEnv = {},
  { preload }: { preload?: string } = {},
): MainProcess {
  const imports = ["--import", "tsx", ...(preload === undefined ? [] : ["--import", preload])];
  const child = spawn(process.execPath, [...imports, main, ...args], {
    env: { PATH: process.env.PATH, KAS_AGENT_KUBERNETES_API_LISTEN_PLAINTEXT: "true", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => {
    out += d;
  });
  child.stderr.on("data", (d: Buffer) => {
    err += d;
  });
  return Object.assign(child, { out: () => out, err: () => err });
}

/** The process's exit code, within 20 s. */
export async function exitCode(child: ChildProcess): Promise<number | null> {
  const [code] = (await once(child, "exit", { signal: AbortSignal.timeout(20_000) })) as [number | null];
  return code;
}

/** The JSON log lines among what a daemon printed, parsed. */
export function jsonLines<T>(out: string): T[] {
  return out
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as T);
}
