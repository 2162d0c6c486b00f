import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { within } from "./until.ts";

const CONFIG_RU = fileURLToPath(new URL("./actioncable/config.ru", import.meta.url));
/** Bound on the output kept for error messages. */
const MAX_OUTPUT = 64 * 1024;

/**
 * A real ActionCable server (Debian's ruby-actioncable under puma) running test/support/actioncable/config.ru:
 * the Redis subscription adapter on `redisUrl`, a `ClusterAgentChannel` streaming
 * `cluster_agent:<agent_id>`. Listens on a free loopback port; `url` is its WebSocket endpoint.
 */
export class ActionCableServer {
  #output = "";

  private constructor(
    readonly url: string,
    readonly proc: ChildProcess,
  ) {}

  static async start(opts: { redisUrl: string; channelPrefix?: string; readyTimeoutMs?: number }) {
    const proc = spawn("puma", ["-b", "tcp://127.0.0.1:0", "--environment", "test", CONFIG_RU], {
      env: {
        ...process.env,
        REDIS_URL: opts.redisUrl,
        ...(opts.channelPrefix !== undefined && { CHANNEL_PREFIX: opts.channelPrefix }),
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    const listening = new Promise<number>((resolve, reject) => {
      const onData = (chunk: Buffer) => {
        output = (output + chunk.toString()).slice(-MAX_OUTPUT);
        const port = /Listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(output)?.[1];
        if (port) resolve(Number(port));
      };
      proc.stdout!.on("data", onData);
      proc.stderr!.on("data", onData);
      proc.once("exit", (code) => reject(new Error(`puma exited (${code}) before listening: ${output}`)));
    });
    try {
      const port = await within(listening, opts.readyTimeoutMs ?? 30_000, `puma to listen: ${output}`);
      const server = new ActionCableServer(`ws://127.0.0.1:${port}/`, proc);
      const keep = (chunk: Buffer) => {
        server.#output = (server.#output + chunk.toString()).slice(-MAX_OUTPUT);
      };
      proc.stdout!.on("data", keep);
      proc.stderr!.on("data", keep);
      return server;
    } catch (err) {
      proc.kill("SIGKILL");
      throw err;
    }
  }

  /** What the server printed (the tail): its log, for failure messages. */
  get output(): string {
    return this.#output;
  }

  async close(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = once(this.proc, "exit");
    this.proc.kill("SIGTERM");
    await within(exited, 10_000, "puma to exit").catch(() => this.proc.kill("SIGKILL"));
  }
}
