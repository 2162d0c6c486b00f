import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { closedPort } from "./ports.ts";

export interface RedisServerOptions {
  /** Listen on a unix socket in the temp dir instead of a loopback TCP port. */
  unixSocket?: boolean;
  /** Deadline for readiness. Default 10 s. */
  readyTimeoutMs?: number;
  /** Extra `redis-server` arguments, e.g. `["--requirepass", "x"]`. */
  args?: string[];
  /** TLS only (the plain port is off): certificate and key files, PEM. Clients are not asked for certificates. */
  tls?: { certFile: string; keyFile: string };
  /** Run as a Sentinel that monitors the master `masterName` at 127.0.0.1:`masterPort` (quorum 1). */
  sentinel?: { masterName: string; masterPort: number };
}

/**
 * A real `redis-server` for tests: no persistence, bound to 127.0.0.1 on a free port (or a unix
 * socket in a temp dir). `stop()` and `start()` again keep the same address, as a Redis that
 * restarts (empty: nothing is saved) would.
 */
export class RedisServer {
  readonly host = "127.0.0.1";
  port = 0;
  /** Unix socket path, when started with `unixSocket`. */
  path: string | undefined;
  #dir = "";
  #proc: ChildProcess | undefined;
  readonly #opts: RedisServerOptions;

  private constructor(opts: RedisServerOptions) {
    this.#opts = opts;
  }

  static async start(opts: RedisServerOptions = {}): Promise<RedisServer> {
    const server = new RedisServer(opts);
    server.#dir = await mkdtemp(join(tmpdir(), "redis-test-"));
    if (opts.unixSocket) {
      server.path = join(server.#dir, "redis.sock");
      await server.start();
      return server;
    }
    // redis-server cannot take port 0 (it means "no TCP"): it gets a port the OS just handed out,
    // and should another process take that port first, the next one.
    for (let attempt = 1; ; attempt++) {
      server.port = await closedPort();
      try {
        await server.start();
        return server;
      } catch (err) {
        if (attempt >= 5 || !/address already in use/i.test((err as Error).message)) throw err;
      }
    }
  }

  /** ioredis connection fields for this server. */
  get connection(): { host: string; port: number } | { path: string } {
    return this.path ? { path: this.path } : { host: this.host, port: this.port };
  }

  /**
   * A client connected as kas connects its own: no offline queue and no retries, so that with the
   * server down a command fails at once; errors (the server stopped under it) only fail commands.
   */
  async client(): Promise<Redis> {
    const client = new Redis({
      ...this.connection,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      lazyConnect: true,
    });
    client.on("error", () => {});
    await client.connect();
    return client;
  }

  get running(): boolean {
    return this.#proc !== undefined;
  }

  /** (Re)starts on the same address; resolves once it accepts connections. */
  async start(): Promise<void> {
    if (this.#proc) return;
    const { tls, sentinel } = this.#opts;
    const listen = this.path
      ? ["--port", "0", "--unixsocket", this.path, "--unixsocketperm", "700"]
      : tls
        ? ["--port", "0", "--tls-port", String(this.port), "--bind", this.host]
        : ["--port", String(this.port), "--bind", this.host];
    // A Sentinel needs a configuration file of its own (it rewrites it), given first.
    const conf = join(this.#dir, "sentinel.conf");
    if (sentinel) {
      await writeFile(conf, `sentinel monitor ${sentinel.masterName} 127.0.0.1 ${sentinel.masterPort} 1\n`);
    }
    const args = [
      ...(sentinel ? [conf, "--sentinel"] : []),
      ...listen,
      ...(tls
        ? ["--tls-cert-file", tls.certFile, "--tls-key-file", tls.keyFile, "--tls-auth-clients", "no"]
        : []),
      ...(sentinel ? [] : ["--save", "", "--appendonly", "no"]),
      ...["--dir", this.#dir, "--daemonize", "no"],
      ...["--loglevel", "notice", "--logfile", ""],
      ...(this.#opts.args ?? []),
    ];
    const readyLine = sentinel ? /\+monitor master/ : /ready to accept connections/i;
    const proc = spawn("redis-server", args, { stdio: ["ignore", "pipe", "pipe"] });
    this.#proc = proc;
    let output = "";
    const ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(`redis-server not ready within ${this.#opts.readyTimeoutMs ?? 10_000} ms: ${output}`),
          ),
        this.#opts.readyTimeoutMs ?? 10_000,
      );
      proc.stdout!.on("data", (chunk: Buffer) => {
        output += chunk.toString();
        if (readyLine.test(output)) {
          clearTimeout(timer);
          resolve();
        }
      });
      proc.stderr!.on("data", (chunk: Buffer) => {
        output += chunk.toString();
      });
      proc.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`redis-server exited (${code}) before it was ready: ${output}`));
      });
    });
    try {
      await ready;
    } catch (err) {
      this.#proc = undefined;
      proc.kill("SIGKILL");
      throw err;
    }
    proc.stdout!.resume();
  }

  /** Stops the server (SIGTERM; nothing is saved) and waits for it to exit. */
  async stop(): Promise<void> {
    const proc = this.#proc;
    if (!proc) return;
    this.#proc = undefined;
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = once(proc, "exit");
    proc.kill("SIGTERM");
    await exited;
  }

  /** Stops the server and removes its temp dir. */
  async close(): Promise<void> {
    await this.stop();
    await rm(this.#dir, { recursive: true, force: true });
  }
}
