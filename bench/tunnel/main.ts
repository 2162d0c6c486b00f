// npm run bench:tunnel [-- --json] [-- --single-mib 128 --multi-mib 32 --echo-rounds 2000 --trials 5]
// Runs the far end in a second process and measures, in one run, raw TCP, raw WebSocket and the
// tunnel (WebSocket + yamux): single-stream bulk, 8-stream aggregate, 64-byte echo round trips.
import { spawn } from "node:child_process";
import { once } from "node:events";
import net from "node:net";
import os from "node:os";
import { createInterface } from "node:readline";
import type { Duplex } from "node:stream";
import { TunnelSession } from "../../lib/tunnel/session/index.ts";
import { dial } from "../../lib/tunnel/transport/index.ts";
import { benchArgs } from "../lib/args.ts";
import { bulkDuplex, bulkWs, openWs } from "../lib/bulk.ts";
import { markdownTable, percentile, round } from "../lib/stats.ts";
import { hello, MODE_ECHO } from "./protocol.ts";

const { args, log } = benchArgs({
  "single-mib": "128",
  "multi-mib": "32",
  "echo-rounds": "2000",
  trials: "5",
  // Which paths to run (comma-separated tcp,ws,tunnel): one alone, for a CPU profile of it.
  kinds: "tcp,ws,tunnel",
});
const SINGLE = Number(args["single-mib"]) * 1024 * 1024;
const MULTI = Number(args["multi-mib"]) * 1024 * 1024;
const ROUNDS = Number(args["echo-rounds"]);
const TRIALS = Number(args.trials);

// ---- the far end ----
// `node --cpu-prof --import tsx bench/tunnel/main.ts` profiles the far end too.
const profileArgs = process.execArgv.filter((a) => a.startsWith("--cpu-prof"));
const child = spawn(
  process.execPath,
  [...profileArgs, "--import", "tsx", new URL("./server.ts", import.meta.url).pathname],
  { stdio: ["pipe", "pipe", "inherit"] },
);
const [line] = (await once(createInterface({ input: child.stdout! }), "line")) as [string];
const ports = JSON.parse(line) as { tcp: number; ws: number; tunnel: string };

// ---- byte streams: TCP sockets and tunnel streams are both Duplexes ----
async function openTcp(): Promise<Duplex> {
  const s = net.connect(ports.tcp, "127.0.0.1");
  s.setNoDelay(true);
  await once(s, "connect");
  return s;
}
const tunnel = new TunnelSession(
  await dial(ports.tunnel, { maxPayload: 64 * 1024 * 1024 }),
  "client",
  JSON.parse(process.env.TUNNEL_OPTS ?? "{}"),
);

async function echoDuplex(open: () => Promise<Duplex>, rounds: number): Promise<number[]> {
  const s = await open();
  s.write(hello(MODE_ECHO));
  const msg = Buffer.alloc(64, 1);
  const times: number[] = [];
  let pending = 0;
  let wake: (() => void) | undefined;
  s.on("data", (c: Buffer) => {
    pending -= c.length;
    if (pending <= 0) wake?.();
  });
  for (let i = 0; i < rounds; i++) {
    const t0 = process.hrtime.bigint();
    pending = msg.length;
    const back = new Promise<void>((r) => {
      wake = r;
    });
    s.write(msg);
    await back;
    times.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  s.destroy();
  return times;
}

// ---- raw WebSocket, one message per write, no multiplexer ----
const wsUrl = `ws://127.0.0.1:${ports.ws}/`;

async function echoWs(rounds: number): Promise<number[]> {
  const ws = await openWs(wsUrl);
  ws.send(hello(MODE_ECHO));
  const msg = Buffer.alloc(64, 1);
  const times: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const t0 = process.hrtime.bigint();
    const back = once(ws, "message");
    ws.send(msg);
    await back;
    times.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  ws.terminate();
  return times;
}

// ---- measurement ----
type Kind = "tcp" | "ws" | "tunnel";
const kinds = args.kinds.split(",") as Kind[];
for (const k of kinds) {
  if (!["tcp", "ws", "tunnel"].includes(k)) throw new Error(`--kinds: unknown path ${JSON.stringify(k)}`);
}
const openTunnel = () => tunnel.open();

async function mibPerSec(fn: () => Promise<unknown>, bytes: number): Promise<number> {
  const t0 = performance.now();
  await fn();
  return bytes / (1024 * 1024) / ((performance.now() - t0) / 1000);
}

const single = { tcp: 0, ws: 0, tunnel: 0 };
const multi = { tcp: 0, ws: 0, tunnel: 0 };
const p50 = { tcp: 0, ws: 0, tunnel: 0 };
const p99 = { tcp: 0, ws: 0, tunnel: 0 };

const bulk: Record<Kind, (bytes: number) => Promise<void>> = {
  tcp: (b) => bulkDuplex(openTcp, b),
  ws: (b) => bulkWs(wsUrl, b),
  tunnel: (b) => bulkDuplex(openTunnel, b),
};
const echo: Record<Kind, (rounds: number) => Promise<number[]>> = {
  tcp: (n) => echoDuplex(openTcp, n),
  ws: (n) => echoWs(n),
  tunnel: (n) => echoDuplex(openTunnel, n),
};

for (const k of kinds) {
  await bulk[k](16 * 1024 * 1024); // warm-up: JIT, TCP windows
  await echo[k](500);
}
// Trials interleave the three kinds so that a noisy neighbour hurts them alike; throughput is the
// median of the trials, latency percentiles come from all echo samples pooled.
const singles: Record<Kind, number[]> = { tcp: [], ws: [], tunnel: [] };
const multis: Record<Kind, number[]> = { tcp: [], ws: [], tunnel: [] };
const echoes: Record<Kind, number[]> = { tcp: [], ws: [], tunnel: [] };
for (let t = 1; t <= TRIALS; t++) {
  log(`trial ${t}/${TRIALS}…`);
  for (const k of kinds) {
    singles[k].push(await mibPerSec(() => bulk[k](SINGLE), SINGLE));
    multis[k].push(
      await mibPerSec(() => Promise.all(Array.from({ length: 8 }, () => bulk[k](MULTI))), 8 * MULTI),
    );
    echoes[k].push(...(await echo[k](ROUNDS)));
  }
}
for (const k of kinds) {
  single[k] = percentile(singles[k], 50);
  multi[k] = percentile(multis[k], 50);
  p50[k] = percentile(echoes[k], 50);
  p99[k] = percentile(echoes[k], 99);
}

tunnel.destroy();
child.stdin!.end();

const r = (o: Record<Kind, number>, d = 1) => ({
  tcp: round(o.tcp, d),
  ws: round(o.ws, d),
  tunnel: round(o.tunnel, d),
});
const result = { single_mib_s: r(single), multi8_mib_s: r(multi), echo_p50_us: r(p50), echo_p99_us: r(p99) };
if (args.json) {
  process.stdout.write(`${JSON.stringify(result)}\n`);
} else {
  const ratio = (o: Record<Kind, number>) => round(o.tunnel / o.ws, 2);
  const row = (name: string, o: Record<Kind, number>, target: string) => [
    name,
    round(o.tcp),
    round(o.ws),
    round(o.tunnel),
    `${ratio(o)}x`,
    target,
  ];
  console.log(
    markdownTable(
      ["metric", "raw TCP", "raw WebSocket", "tunnel", "tunnel / WS", "target"],
      [
        row("single stream MiB/s", single, ">= 0.95x"),
        row("8 streams MiB/s (aggregate)", multi, ">= 0.95x"),
        row("64 B echo p50 µs", p50, "-"),
        row("64 B echo p99 µs", p99, "<= 1.1x"),
      ],
    ),
  );
  console.log(
    `\nmedian of ${TRIALS} interleaved trials: ${SINGLE / 1048576} MiB single, 8 x ${MULTI / 1048576} MiB ` +
      `multi, ${ROUNDS} echo rounds each; node ${process.version}, ${os.cpus().length} cores`,
  );
}
