// npx tsx bench/tunnel/new-input.ts [-- --tunnels 300 --cost 2 --trials 3 --json]
// What a burst of new tunnels' first input does to an established tunnel's requests, with the
// accepting side's pacing on (maxLoopUtilization 0.5: the handshake pacer and the inbound gate,
// lib/tunnel/transport/inbound-gate.ts) and off (1), alternated. The servers run here; the probe
// and the burst each in a child process of their own. A probe tunnel, older than the gate's 10 s,
// echoes a small message every 5 ms; then N tunnels connect and, once all are up, each opens a
// stream and sends one message at the same moment, which the server answers after `cost` ms of CPU
// (an agent's modules starting up). Measured in the children: the probe's round trips during the
// burst against before it, and how long until every burst message was answered.
import { fork } from "node:child_process";
import { cpus, loadavg } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import { serveTunnels, TunnelClient, type TunnelSession } from "../../lib/tunnel/index.ts";
import { NEW_FOR_MS } from "../../lib/tunnel/transport/inbound-gate.ts";
import { benchArgs } from "../lib/args.ts";
import { markdownTable, percentile, round } from "../lib/stats.ts";

/** Epoch ms, comparable across the processes. */
const now = () => performance.timeOrigin + performance.now();
type Sample = { at: number; ms: number };
type ToChild = { role: "probe" | "burst"; url: string; tunnels: number };
type FromChild = { up: true } | { samples: Sample[] } | { from: number; to: number };

if (process.argv[2] === "--child") {
  process.once("message", (m: ToChild) => void (m.role === "probe" ? probeChild(m) : burstChild(m)));
} else {
  await main();
}

async function main(): Promise<void> {
  const { args, log } = benchArgs({ tunnels: "300", cost: "2", trials: "3" });
  for (const name of ["tunnels", "trials"] as const)
    if (!(Number.isInteger(Number(args[name])) && Number(args[name]) > 0))
      throw new Error(`--${name}: expected a positive integer, got ${args[name]}`);
  const cost = Number(args.cost);
  if (!(cost >= 0)) throw new Error(`--cost: expected milliseconds (>= 0), got ${args.cost}`);
  const burn = (ms: number) => {
    const until = performance.now() + ms;
    while (performance.now() < until);
  };
  const onSession = (session: TunnelSession) =>
    session.on("stream", (stream) => {
      stream.on("error", () => {}); // the child's tunnels are cut when it exits
      stream.on("data", (chunk: Buffer) => {
        if (chunk[0] === 0x42) burn(cost); // "B": a burst tunnel's first message
        stream.write(chunk);
      });
      stream.on("end", () => stream.end());
    });
  const modes = { paced: 0.5, unpaced: 1 } as const;
  const servers = {
    paced: await serveTunnels({ host: "127.0.0.1", maxLoopUtilization: modes.paced, onSession }),
    unpaced: await serveTunnels({ host: "127.0.0.1", maxLoopUtilization: modes.unpaced, onSession }),
  };
  log(
    `new-input: ${args.tunnels} new tunnels, ${cost} ms each, ${args.trials} trials; load ${round(loadavg()[0]!, 2)} on ${cpus().length} cores`,
  );
  const results: Record<keyof typeof modes, Trial[]> = { paced: [], unpaced: [] };
  // A burst on each server first, not measured: the first trial would otherwise pay for compiling the path.
  for (const server of Object.values(servers)) await burstOnly(server.url, Number(args.tunnels));
  for (let t = 0; t < Number(args.trials); t++) {
    for (const mode of t % 2 === 0 ? (["unpaced", "paced"] as const) : (["paced", "unpaced"] as const)) {
      const r = await trial(servers[mode].url, Number(args.tunnels));
      results[mode].push(r);
      log(`  trial ${t + 1} ${mode}: probe p99 during ${round(percentile(r.during, 99), 2)} ms`);
    }
  }
  await Promise.all(Object.values(servers).map((s) => s.close(1000)));
  const med = (xs: number[]) => round(percentile(xs, 50), 2);
  const rows = (Object.keys(modes) as Array<keyof typeof modes>).map((mode) => {
    const rs = results[mode];
    return [
      mode,
      med(rs.map((r) => percentile(r.before, 99))),
      rs.map((r) => round(percentile(r.during, 50), 2)).join(", "),
      rs.map((r) => round(percentile(r.during, 99), 2)).join(", "),
      rs.map((r) => round(Math.max(...r.during), 1)).join(", "),
      rs.map((r) => round(r.burstMs, 0)).join(", "),
    ];
  });
  const header = [
    "accepting side",
    "probe p99 before, ms (median)",
    "probe p50 during, ms",
    "probe p99 during, ms",
    "probe max during, ms",
    "burst answered in, ms",
  ];
  if (args.json) console.log(JSON.stringify({ tunnels: Number(args.tunnels), costMs: cost, results }));
  else console.log(markdownTable(header, rows));
  process.exit(0);
}

interface Trial {
  /** The probe's round trips in the 2 s before the burst's tunnels began to connect, ms. */
  before: number[];
  /** Those that overlapped the burst. */
  during: number[];
  /** From the burst's first message sent to its last answer. */
  burstMs: number;
}

function child(role: ToChild["role"], url: string, tunnels: number) {
  const proc = fork(new URL(import.meta.url).pathname, ["--child"], { execArgv: ["--import", "tsx"] });
  proc.send({ role, url, tunnels } satisfies ToChild);
  const next = () => new Promise<FromChild>((resolve) => proc.once("message", resolve));
  return { proc, next };
}

async function burstOnly(url: string, tunnels: number): Promise<void> {
  const burst = child("burst", url, tunnels);
  await burst.next();
  burst.proc.kill();
}

/** One trial: a probe process (its tunnel older than the gate's NEW_FOR_MS), then a burst process. */
async function trial(url: string, tunnels: number): Promise<Trial> {
  const start = (role: ToChild["role"]) => child(role, url, tunnels);
  const probe = start("probe");
  await probe.next(); // up
  await sleep(NEW_FOR_MS + 500);
  const beforeTo = now();
  const burst = start("burst");
  const { from, to } = (await burst.next()) as { from: number; to: number };
  probe.proc.send("stop");
  const { samples } = (await probe.next()) as { samples: Sample[] };
  for (const p of [probe, burst]) p.proc.kill();
  return {
    before: samples.filter((x) => x.at >= beforeTo - 2000 && x.at < beforeTo).map((x) => x.ms),
    during: samples.filter((x) => x.at + x.ms > from && x.at < to).map((x) => x.ms),
    burstMs: to - from,
  };
}

async function up(url: string) {
  const client = new TunnelClient({ url, dial: { proxy: false } }).start();
  return client.ready(60_000);
}

/** One stream, a message every 5 ms, each round trip timed, until told to stop. */
async function probeChild({ url }: ToChild): Promise<void> {
  const stream = await (await up(url)).open();
  const samples: Sample[] = [];
  let stop = false;
  process.once("message", () => {
    stop = true;
  });
  process.send!({ up: true } satisfies FromChild);
  while (!stop) {
    const t0 = now();
    stream.write(Buffer.from("P"));
    await new Promise((r) => stream.once("data", r));
    samples.push({ at: t0, ms: now() - t0 });
    await sleep(5);
  }
  process.send!({ samples } satisfies FromChild);
}

/** N tunnels up, then a stream and one message on each at the same moment; reports when all were answered. */
async function burstChild({ url, tunnels }: ToChild): Promise<void> {
  const sessions = await Promise.all(Array.from({ length: tunnels }, () => up(url)));
  const streams = await Promise.all(sessions.map((s) => s.open()));
  const from = now();
  await Promise.all(
    streams.map(async (s) => {
      s.write(Buffer.from("B"));
      await new Promise((r) => s.once("data", r));
      s.end();
    }),
  );
  process.send!({ from, to: now() } satisfies FromChild);
}
