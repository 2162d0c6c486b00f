import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import net from "node:net";
import { createInterface } from "node:readline";
import { buildGoPeer } from "./go-build.ts";

/** One JSON line printed by the Go peer; `event` names it (see test/interop/go/*.go). */
export interface GoEvent {
  event: string;
  [field: string]: unknown;
}

export type GoFlags = Record<string, string | number>;

const running = new Set<GoPeer>();

/**
 * The Go reference peer as a child process: it dials a loopback listener of ours, runs one mode
 * of hashicorp/yamux over that TCP connection and reports results as JSON lines.
 */
export class GoPeer {
  readonly events: GoEvent[] = [];
  readonly exited: Promise<number | null>;
  readonly #child: ChildProcess;
  #stderr = "";
  #exitCode: number | null | undefined;
  #listeners = new Set<() => void>();

  constructor(child: ChildProcess) {
    this.#child = child;
    running.add(this);
    createInterface({ input: child.stdout! }).on("line", (line) => {
      try {
        this.events.push(JSON.parse(line) as GoEvent);
      } catch {
        this.events.push({ event: "unparsed", line });
      }
      this.#notify();
    });
    child.stderr!.on("data", (d: Buffer) => {
      this.#stderr = (this.#stderr + d.toString()).slice(-8000);
      this.#notify();
    });
    this.exited = once(child, "close").then(([code]) => {
      this.#exitCode = code as number | null;
      running.delete(this);
      this.#notify();
      return this.#exitCode;
    });
  }

  /** yamux's own log lines ([ERR]/[WARN]) and anything else on stderr, for assertions and errors. */
  get stderr(): string {
    return this.#stderr;
  }

  /** Waits until stderr contains `text`: the log line and the frame it explains travel apart. */
  waitForStderr(text: string, timeoutMs = 10_000): Promise<string> {
    return this.#until(
      () => (this.#stderr.includes(text) ? this.#stderr : undefined),
      `stderr "${text}"`,
      timeoutMs,
    );
  }

  named(event: string): GoEvent[] {
    return this.events.filter((e) => e.event === event);
  }

  /** The first event named `event` (and matching `match`), seen already or still to come. */
  waitFor(event: string, match: (e: GoEvent) => boolean = () => true, timeoutMs = 30_000): Promise<GoEvent> {
    return this.#until(
      () => this.events.find((e) => e.event === event && match(e)),
      `event "${event}"`,
      timeoutMs,
    );
  }

  /** Waits until `n` events named `event` have been printed; returns them. */
  async waitForCount(event: string, n: number, timeoutMs = 30_000): Promise<GoEvent[]> {
    await this.#until(
      () => (this.named(event).length >= n ? true : undefined),
      `${n} "${event}" events`,
      timeoutMs,
    );
    return this.named(event);
  }

  /** Resolves with the exit code; the peer must exit by itself within the deadline. */
  waitExit(timeoutMs = 15_000): Promise<number | null> {
    return this.#until(
      () => (this.#exitCode === undefined ? undefined : { code: this.#exitCode }),
      "exit",
      timeoutMs,
    ).then((r) => r.code);
  }

  kill(): void {
    if (this.#exitCode === undefined) this.#child.kill("SIGKILL");
  }

  describe(): string {
    const events = this.events.map((e) => JSON.stringify(e)).join("\n  ");
    return `Go peer events:\n  ${events || "(none)"}\nGo peer stderr:\n${this.#stderr || "(empty)"}`;
  }

  #until<T>(get: () => T | undefined, what: string, timeoutMs: number): Promise<T> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const v = get();
        if (v !== undefined) return finish(() => resolve(v));
        if (this.#exitCode !== undefined) {
          finish(() =>
            reject(new Error(`Go peer exited (${this.#exitCode}) before ${what}\n${this.describe()}`)),
          );
        }
      };
      const timer = setTimeout(
        () =>
          finish(() =>
            reject(new Error(`no ${what} from the Go peer within ${timeoutMs} ms\n${this.describe()}`)),
          ),
        timeoutMs,
      );
      const finish = (settle: () => void) => {
        clearTimeout(timer);
        this.#listeners.delete(check);
        settle();
      };
      this.#listeners.add(check);
      check();
    });
  }

  #notify(): void {
    for (const l of [...this.#listeners]) l();
  }
}

/**
 * Starts the Go peer in `mode` and returns it with our end of its TCP connection. The yamux
 * role (client/server) is fixed by the mode; the Go side always dials.
 */
export async function startGoPeer(
  mode: string,
  flags: GoFlags = {},
): Promise<{ peer: GoPeer; socket: net.Socket }> {
  const binary = await buildGoPeer();
  const server = net.createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as net.AddressInfo;
  const args = [`-addr=127.0.0.1:${port}`, `-mode=${mode}`];
  for (const [k, v] of Object.entries(flags)) args.push(`-${k}=${v}`);
  const peer = new GoPeer(spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] }));
  try {
    const socket = await new Promise<net.Socket>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`Go peer did not connect\n${peer.describe()}`)),
        10_000,
      );
      server.once("connection", (s) => {
        clearTimeout(timer);
        resolve(s);
      });
      peer.exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`Go peer exited before connecting\n${peer.describe()}`));
      });
    });
    socket.setNoDelay(true);
    return { peer, socket };
  } catch (err) {
    peer.kill();
    throw err;
  } finally {
    server.close();
  }
}

/** Kills peers a failed test left behind (only processes started here). */
export function killGoPeers(): void {
  for (const p of running) p.kill();
}
