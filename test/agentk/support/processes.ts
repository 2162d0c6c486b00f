import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";

const AGENTK_MAIN = join(import.meta.dirname, "../../../cmd/agentk/main.ts");

/** A child process whose stdout is JSON lines (pino logs). */
export class JsonLinesProcess {
  readonly child: ChildProcess;
  readonly lines: Record<string, unknown>[] = [];
  #stderr = "";
  #partial = "";
  #exit: Promise<number | null>;

  constructor(args: string[], env: NodeJS.ProcessEnv) {
    this.child = spawn(process.execPath, ["--import", "tsx", ...args], {
      env: { PATH: process.env.PATH, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.#exit = once(this.child, "exit").then(([code]) => code as number | null);
    this.child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      const parts = (this.#partial + chunk).split("\n");
      this.#partial = parts.pop()!;
      for (const line of parts) {
        try {
          this.lines.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          this.lines.push({ raw: line });
        }
        this.child.emit("line");
      }
    });
    this.child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
      this.#stderr += chunk;
    });
  }

  get stderr(): string {
    return this.#stderr;
  }

  /** All output so far, for assertions that something never appears. */
  get output(): string {
    return this.lines.map((l) => JSON.stringify(l)).join("\n") + this.#stderr;
  }

  /** Lines matching `predicate`, waiting until there are at least `count` of them. */
  async waitFor(
    predicate: (line: Record<string, unknown>) => boolean,
    count = 1,
    timeoutMs = 20_000,
  ): Promise<Record<string, unknown>[]> {
    const signal = AbortSignal.timeout(timeoutMs);
    for (;;) {
      const found = this.lines.filter(predicate);
      if (found.length >= count) return found;
      if (this.child.exitCode !== null) {
        throw new Error(`process exited (${this.child.exitCode}) before the line; stderr: ${this.#stderr}`);
      }
      await once(this.child, "line", { signal }).catch((err) => {
        throw new Error(`no matching line within ${timeoutMs} ms; output:\n${this.output}`, { cause: err });
      });
    }
  }

  async exitCode(timeoutMs = 20_000): Promise<number | null> {
    const timeout = new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error(`no exit within ${timeoutMs} ms`)), timeoutMs).unref(),
    );
    return Promise.race([this.#exit, timeout]);
  }

  kill(signal: NodeJS.Signals = "SIGKILL"): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
  }
}

export function spawnAgentk(args: string[], env: NodeJS.ProcessEnv): JsonLinesProcess {
  return new JsonLinesProcess([AGENTK_MAIN, ...args], env);
}

/** Where agentk's observability listener ended up (it listens on port 0 in tests): from its "agentk starting" line. */
export async function observabilityUrl(agent: JsonLinesProcess): Promise<string> {
  const [line] = await agent.waitFor(msg("agentk starting"));
  return String(line!.url);
}

/** Log lines with this message. */
export const msg = (text: string) => (line: Record<string, unknown>) => line.msg === text;
