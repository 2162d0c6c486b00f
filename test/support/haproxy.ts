import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { closedPort } from "./ports.ts";
import { until } from "./until.ts";

export interface HaproxyOptions {
  /** Backend servers, `host:port` each (kas replicas' agent listeners). */
  backends: string[];
  /** `roundrobin` (default) or `leastconn`. */
  balance?: "roundrobin" | "leastconn";
  /** Milliseconds between health checks (TCP connects) of each backend. Default 200. */
  checkIntervalMs?: number;
  /** Deadline for haproxy to listen. Default 10 s. */
  readyTimeoutMs?: number;
}

/**
 * A real `haproxy` (Debian's) in front of some TCP backends, as a load balancer in front of kas
 * replicas: `mode tcp`, so WebSocket upgrades and the long-lived tunnels after them pass through
 * untouched (`timeout tunnel`); a backend that refuses connections is marked down by its health
 * check and a connect that fails is redispatched to the other server. Foreground (`-db`), killed
 * by `close()`.
 */
export class Haproxy {
  readonly host = "127.0.0.1";
  port = 0;
  #dir = "";
  #proc: ChildProcess | undefined;
  #output = "";

  private constructor() {}

  static async start(opts: HaproxyOptions): Promise<Haproxy> {
    const proxy = new Haproxy();
    proxy.#dir = await mkdtemp(join(tmpdir(), "haproxy-test-"));
    // haproxy cannot report a port the OS picked: it gets one the OS just handed out, and should
    // another process take that port first, the next one.
    for (let attempt = 1; ; attempt++) {
      proxy.port = await closedPort();
      try {
        await proxy.#start(opts);
        return proxy;
      } catch (err) {
        if (attempt >= 5 || !/cannot bind|address already in use/i.test((err as Error).message)) {
          await proxy.close();
          throw err;
        }
      }
    }
  }

  /** `ws://host:port` of the frontend. */
  get url(): string {
    return `ws://${this.host}:${this.port}`;
  }

  /** What haproxy wrote (alerts, warnings). */
  get output(): string {
    return this.#output;
  }

  async #start({
    backends,
    balance = "roundrobin",
    checkIntervalMs = 200,
    readyTimeoutMs = 10_000,
  }: HaproxyOptions) {
    const config = [
      "global",
      "  maxconn 1000",
      "  log stderr format raw local0 notice",
      "defaults",
      "  mode tcp",
      "  log global",
      "  timeout connect 1s",
      "  timeout client 60s",
      "  timeout server 60s",
      // A WebSocket tunnel is long-lived; keepalive pings keep it busy well within this.
      "  timeout tunnel 1h",
      "  timeout client-fin 5s",
      "  timeout server-fin 5s",
      // A replica that stops accepting: the connect is retried on the other server.
      "  retries 3",
      "  option redispatch 1",
      "frontend agents",
      `  bind ${this.host}:${this.port}`,
      "  default_backend kas",
      "backend kas",
      `  balance ${balance}`,
      `  default-server check inter ${checkIntervalMs}ms fall 1 rise 1`,
      ...backends.map((address, i) => `  server kas${i} ${address}`),
      "",
    ].join("\n");
    const file = join(this.#dir, "haproxy.cfg");
    await writeFile(file, config);
    const proc = spawn("haproxy", ["-db", "-f", file], { stdio: ["ignore", "pipe", "pipe"] });
    this.#proc = proc;
    const collect = (chunk: Buffer) => {
      this.#output += chunk.toString();
    };
    proc.stdout!.on("data", collect);
    proc.stderr!.on("data", collect);
    try {
      await until(
        async () => {
          if (proc.exitCode !== null || proc.signalCode !== null) {
            throw new Error(`haproxy exited (${proc.exitCode ?? proc.signalCode}): ${this.#output}`);
          }
          return this.#accepts();
        },
        readyTimeoutMs,
        `haproxy listening on ${this.host}:${this.port}`,
      );
    } catch (err) {
      await this.#stop();
      throw err;
    }
  }

  /** Whether the frontend accepts a TCP connection now. */
  #accepts(): Promise<boolean> {
    return new Promise((resolve) => {
      const socket = connect(this.port, this.host);
      socket.once("connect", () => {
        socket.destroy();
        resolve(true);
      });
      socket.once("error", () => resolve(false));
    });
  }

  async #stop(): Promise<void> {
    const proc = this.#proc;
    this.#proc = undefined;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = once(proc, "exit");
    proc.kill("SIGKILL");
    await exited;
  }

  /** Kills haproxy and removes its temp dir. */
  async close(): Promise<void> {
    await this.#stop();
    await rm(this.#dir, { recursive: true, force: true });
  }
}
