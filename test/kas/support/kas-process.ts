import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import type { KasAddresses } from "../../../cmd/kas/server.ts";

const MAIN = join(import.meta.dirname, "../../../cmd/kas/main.ts");

export interface KasProcess {
  child: ChildProcess;
  addresses: KasAddresses;
  /** Everything written to stdout so far (JSON log lines). */
  out(): string;
  err(): string;
  /** The exit code (null when killed by a signal), within `timeoutMs`. */
  exitCode(timeoutMs?: number): Promise<number | null>;
  /** SIGKILL if still running (cleanup). */
  kill(): void;
}

/**
 * Environment putting every listener on a loopback port the OS picks (port 0): nothing to race
 * for. Where each one ended up is read from kas's "kas listening" line (`KasProcess.addresses`).
 */
export function portsEnv(): Record<string, string> {
  const names = [
    "KAS_AGENT_LISTEN_ADDRESS",
    "KAS_OBSERVABILITY_LISTEN_ADDRESS",
    "KAS_API_LISTEN_ADDRESS",
    "KAS_AGENT_KUBERNETES_API_LISTEN_ADDRESS",
    "KAS_PRIVATE_API_LISTEN_ADDRESS",
  ];
  return Object.fromEntries(names.map((name) => [name, "127.0.0.1:0"]));
}

/** `host:port` of a listener's URL, to start another kas on the same address. */
export function listenAddressOf(url: string): string {
  return new URL(url).host;
}

export interface SpawnKasOptions {
  timeoutMs?: number;
  /** kas's entry point: a .ts file runs under tsx (default cmd/kas/main.ts), a .js file (the build) as is. */
  entry?: string;
}

/** Spawns `kas` and waits for its "kas listening" line. */
export async function spawnKas(
  env: Record<string, string>,
  { timeoutMs = 20_000, entry = MAIN }: SpawnKasOptions = {},
): Promise<KasProcess> {
  const args = entry.endsWith(".ts") ? ["--import", "tsx", entry] : [entry];
  const child = spawn(process.execPath, args, {
    // The proxy serves plain HTTP unless a test asks for TLS (no certificate made under the home directory).
    env: { PATH: process.env.PATH, KAS_AGENT_KUBERNETES_API_LISTEN_PLAINTEXT: "true", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout!.on("data", (d: Buffer) => {
    out += d;
  });
  child.stderr!.on("data", (d: Buffer) => {
    err += d;
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  };
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    for (;;) {
      const line = out.split("\n").find((l) => l.includes('"msg":"kas listening"'));
      if (line) {
        return {
          child,
          addresses: JSON.parse(line).addresses as KasAddresses,
          out: () => out,
          err: () => err,
          exitCode: (ms = 20_000) =>
            Promise.race([
              exited,
              new Promise<never>((_, reject) =>
                setTimeout(() => reject(new Error(`kas did not exit within ${ms} ms`)), ms).unref(),
              ),
            ]),
          kill,
        };
      }
      if (child.exitCode !== null) throw new Error(`kas exited (${child.exitCode}): ${err}${out}`);
      await Promise.race([once(child.stdout!, "data", { signal }), exited]);
    }
  } catch (e) {
    kill();
    throw new Error(`kas did not start: ${(e as Error).message}\n${err}${out}`);
  }
}
