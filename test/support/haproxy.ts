import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { closedPort } from "./ports.ts";
import { until } from "./until.ts";

/** A backend server: where traffic goes, and how haproxy decides it is UP. */
export interface HaproxyServer {
  /** `host:port` traffic goes to. */
  address: string;
  /**
   * Health check: an HTTP GET of this URL (its host, port and path: kas's `/readiness` on its
   * observability port), UP on 2xx. Without it, a TCP connect to `address`.
   */
  healthUrl?: string;
}

export interface HaproxyOptions {
  /** Backend servers of the TCP frontend at `url` (kas replicas' agent listeners). */
  backends: Array<string | HaproxyServer>;
  /**
   * Backend servers of a second frontend, in HTTP mode, at `httpUrl` (kas replicas' APIs for
   * GitLab): requests balanced one by one over kept-alive connections, as an HTTP load balancer
   * does. Its health checks follow each server's `healthUrl` (all with the same path).
   */
  httpBackends?: Array<string | HaproxyServer>;
  /**
   * How the second frontend balances: `http` (default) request by request over its own
   * connections to the servers, or `tcp`, each client connection passed whole to one server (as a
   * TCP load balancer does: the client's keep-alive connection is a connection to one replica).
   */
  httpFrontendMode?: "http" | "tcp";
  /** `roundrobin` (default) or `leastconn`. */
  balance?: "roundrobin" | "leastconn";
  /** Milliseconds between health checks (TCP connects) of each backend. Default 200. */
  checkIntervalMs?: number;
  /** Deadline for haproxy to listen. Default 10 s. */
  readyTimeoutMs?: number;
  /** Connections at once (global `maxconn`; each takes two sockets). Default 1000. */
  maxConnections?: number;
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
  /** The HTTP frontend's port (with `httpBackends`). */
  httpPort = 0;
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
      proxy.httpPort = opts.httpBackends ? await closedPort() : 0;
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

  /** `http://host:port` of the HTTP frontend (with `httpBackends`). */
  get httpUrl(): string {
    if (!this.httpPort) throw new Error("haproxy: no HTTP frontend (httpBackends)");
    return `http://${this.host}:${this.httpPort}`;
  }

  /**
   * What haproxy's health checks say of each server now, by `<backend>/<server>` (`kas/kas0`,
   * `api/api1`): "UP", "DOWN", "MAINT"… Read from its stats socket.
   */
  async serverStatus(): Promise<Record<string, string>> {
    const csv = await this.#command("show stat");
    const rows = csv.split("\n").filter((l) => l && !l.startsWith("#"));
    const status: Record<string, string> = {};
    for (const row of rows) {
      const [backend, server, ...rest] = row.split(",");
      if (server === "FRONTEND" || server === "BACKEND") continue;
      status[`${backend}/${server}`] = rest[15]!; // column 18 of `show stat`: status
    }
    return status;
  }

  /** One command on the stats socket; resolves with haproxy's whole answer. */
  #command(command: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = connect(join(this.#dir, "admin.sock"));
      let answer = "";
      socket.setEncoding("utf8");
      socket.on("data", (d: string) => {
        answer += d;
      });
      socket.once("error", reject);
      socket.once("end", () => resolve(answer));
      socket.setTimeout(5000, () => socket.destroy(new Error(`haproxy: no answer to ${command}`)));
      socket.end(`${command}\n`);
    });
  }

  /** What haproxy wrote (alerts, warnings). */
  get output(): string {
    return this.#output;
  }

  async #start({
    backends,
    httpBackends,
    httpFrontendMode = "http",
    balance = "roundrobin",
    checkIntervalMs = 200,
    readyTimeoutMs = 10_000,
    maxConnections = 1000,
  }: HaproxyOptions) {
    const servers = (prefix: string, list: Array<string | HaproxyServer>) => {
      const all = list.map((s) => (typeof s === "string" ? { address: s } : s));
      const path = all.find((s) => s.healthUrl)?.healthUrl;
      return [
        ...(path ? [`  option httpchk GET ${new URL(path).pathname}`, "  http-check expect status 200"] : []),
        // Two failed checks in a row take a server out: one slow answer on a loaded machine does not.
        `  default-server check inter ${checkIntervalMs}ms fall 2 rise 1`,
        ...all.map((s, i) => {
          const health = s.healthUrl ? new URL(s.healthUrl) : undefined;
          const check = health ? ` addr ${health.hostname} port ${health.port}` : "";
          return `  server ${prefix}${i} ${s.address}${check}`;
        }),
      ];
    };
    const http = httpBackends
      ? [
          "frontend api",
          `  mode ${httpFrontendMode}`,
          `  bind ${this.host}:${this.httpPort}`,
          ...(httpFrontendMode === "http"
            ? ["  timeout http-keep-alive 10s"]
            : ["  option tcplog", "  log stderr format raw local0 info"]),
          "  default_backend api",
          "backend api",
          `  mode ${httpFrontendMode}`,
          `  balance ${balance}`,
          ...servers("api", httpBackends),
        ]
      : [];
    const config = [
      "global",
      `  maxconn ${maxConnections}`,
      "  log stderr format raw local0 notice",
      `  stats socket ${join(this.#dir, "admin.sock")} mode 600 level admin`,
      "defaults",
      "  mode tcp",
      "  log global",
      "  timeout connect 1s",
      "  timeout check 2s",
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
      ...servers("kas", backends),
      ...http,
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
          return (await this.#accepts(this.port)) && (!this.httpPort || (await this.#accepts(this.httpPort)));
        },
        readyTimeoutMs,
        `haproxy listening on ${this.host}:${this.port}`,
      );
    } catch (err) {
      await this.#stop();
      throw err;
    }
  }

  /** Whether a frontend accepts a TCP connection now. */
  #accepts(port: number): Promise<boolean> {
    return new Promise((resolve) => {
      const socket = connect(port, this.host);
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
