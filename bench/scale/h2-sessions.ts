// npx tsx bench/scale/h2-sessions.ts [--sessions 2000 --streams 3 --json]
// What one HTTP/2 connection costs a server outside V8's heap: kas serves each agent's gRPC over
// a tunnel stream (a JavaScript Duplex, which node:http2 wraps in a JSStreamSocket) on one shared
// node:http2 server. A server process holds N connections, each with `--streams` open streams
// (as an agent's configuration, views and GitOps streams), in turn: sockets alone, Duplexes alone
// (the baseline rows), HTTP/2 over the sockets and HTTP/2 over Duplexes around the same sockets.
// Memory is read after forced full collections; V8's new space (which grows to tens of MiB under
// any burst, whatever N) is taken out of RSS, and what is left less the heap's growth is native.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import { createInterface } from "node:readline";
import { Duplex } from "node:stream";
import v8 from "node:v8";
import { benchArgs } from "../lib/args.ts";
import { markdownTable, round } from "../lib/stats.ts";

const MODES = ["socket", "duplex", "h2-socket", "h2-duplex"] as const;
type Mode = (typeof MODES)[number];

interface Reading {
  rssKiB: number;
  heapUsedKiB: number;
  newSpaceKiB: number;
  externalKiB: number;
}

function reading(): Reading {
  globalThis.gc?.();
  globalThis.gc?.();
  const m = process.memoryUsage();
  const newSpace = v8.getHeapSpaceStatistics().find((s) => s.space_name === "new_space")?.space_size ?? 0;
  return {
    rssKiB: Number(readFileSync("/proc/self/statm", "utf8").split(" ")[1]) * 4,
    heapUsedKiB: m.heapUsed / 1024,
    newSpaceKiB: newSpace / 1024,
    externalKiB: m.external / 1024,
  };
}

/** A plain Duplex around `sock`: what a tunnel stream is to node:http2 (no native handle). */
function wrap(sock: net.Socket): Duplex {
  const d = new Duplex({
    read: () => void sock.resume(),
    write: (chunk, _enc, cb) => void sock.write(chunk, cb),
    final: (cb) => {
      sock.end();
      cb();
    },
    destroy: (err, cb) => {
      sock.destroy();
      cb(err);
    },
  });
  sock.on("data", (c: Buffer) => {
    if (!d.push(c)) sock.pause();
  });
  sock.on("end", () => d.push(null));
  sock.on("error", () => {});
  return d;
}

/** The server process: holds what `mode` says per connection; prints readings on stdin's lines. */
function serve(mode: Mode): void {
  // As grpc-js sets up its http2 servers.
  const h2 = http2.createServer({
    maxSendHeaderBlockLength: Number.MAX_SAFE_INTEGER,
    maxSessionMemory: Number.MAX_SAFE_INTEGER,
  });
  const held: unknown[] = [];
  h2.on("stream", (s) => {
    s.on("data", () => {});
    s.respond({ ":status": 200, "content-type": "application/grpc" });
    s.write(Buffer.alloc(64));
    held.push(s);
  });
  const server = net.createServer((sock) => {
    if (mode === "h2-socket") h2.emit("connection", sock);
    else if (mode === "h2-duplex") h2.emit("connection", wrap(sock));
    else held.push(mode === "duplex" ? wrap(sock) : sock);
  });
  server.listen(0, "127.0.0.1", () => {
    process.stdout.write(`${JSON.stringify({ port: (server.address() as net.AddressInfo).port })}\n`);
  });
  createInterface({ input: process.stdin }).on("line", () => {
    process.stdout.write(`${JSON.stringify(reading())}\n`);
  });
}

/** Opens `sessions` connections to `port` (HTTP/2 with `streams` open streams each, or raw). */
async function connect(port: number, sessions: number, streams: number, h2: boolean): Promise<() => void> {
  const held: Array<{ destroy(): void }> = [];
  const pending: Array<Promise<unknown>> = [];
  for (let i = 0; i < sessions; i++) {
    if (!h2) {
      const s = net.connect(port, "127.0.0.1");
      held.push(s);
      pending.push(once(s, "connect"));
      continue;
    }
    const s = http2.connect(`http://127.0.0.1:${port}`);
    s.on("error", () => {});
    held.push(s);
    for (let j = 0; j < streams; j++) {
      const r = s.request({ ":method": "POST", ":path": "/x", "content-type": "application/grpc" });
      r.on("data", () => {});
      r.on("error", () => {});
      r.write(Buffer.alloc(100));
      pending.push(once(r, "response"));
    }
    if (i % 100 === 99) await Promise.all(pending.splice(0));
  }
  await Promise.all(pending);
  return () => {
    for (const s of held) s.destroy();
  };
}

async function measure(mode: Mode, sessions: number, streams: number) {
  const child = spawn(
    process.execPath,
    ["--expose-gc", "--import", "tsx", import.meta.filename, "--serve", mode],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async <T>(): Promise<T> => JSON.parse((await lines.next()).value as string) as T;
  const ask = async () => {
    child.stdin!.write("\n");
    return next<Reading>();
  };
  try {
    const { port } = await next<{ port: number }>();
    const before = await ask();
    const close = await connect(port, sessions, streams, mode.startsWith("h2"));
    // Let the last frames land before reading.
    await new Promise((r) => setTimeout(r, 1_000));
    const after = await ask();
    close();
    const per = (k: keyof Reading) => (after[k] - before[k]) / sessions;
    const rssLessNew = per("rssKiB") - per("newSpaceKiB");
    return {
      mode,
      rss: per("rssKiB"),
      newSpaceMiB: (after.newSpaceKiB - before.newSpaceKiB) / 1024,
      rssLessNew,
      heap: per("heapUsedKiB"),
      native: rssLessNew - per("heapUsedKiB"),
      external: per("externalKiB"),
    };
  } finally {
    child.kill();
  }
}

const serveAt = process.argv.indexOf("--serve");
if (serveAt >= 0) {
  serve(process.argv[serveAt + 1] as Mode);
} else {
  const { args, log } = benchArgs({ sessions: "2000", streams: "3" });
  const sessions = Number(args.sessions);
  const streams = Number(args.streams);
  const rows: Array<Awaited<ReturnType<typeof measure>>> = [];
  for (const mode of MODES) {
    log(`${mode}: ${sessions} connections${mode.startsWith("h2") ? `, ${streams} streams each` : ""}`);
    rows.push(await measure(mode, sessions, streams));
  }
  if (args.json) {
    process.stdout.write(`${JSON.stringify({ sessions, streams, rows })}\n`);
  } else {
    const raw = (m: Mode) => rows.find((r) => r.mode === (m.endsWith("duplex") ? "duplex" : "socket"))!;
    console.log(
      markdownTable(
        [
          "server holds, per connection",
          "RSS KiB",
          "new space growth MiB",
          "RSS less new space KiB",
          "heap KiB",
          "native KiB",
          "HTTP/2's share, RSS less new space KiB",
        ],
        rows.map((r) => [
          r.mode,
          round(r.rss),
          round(r.newSpaceMiB),
          round(r.rssLessNew),
          round(r.heap),
          round(r.native),
          r.mode.startsWith("h2") ? round(r.rssLessNew - raw(r.mode).rssLessNew) : "(baseline)",
        ]),
      ),
    );
  }
}
