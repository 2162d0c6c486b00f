// npx tsx bench/tunnel/new-input.ts [-- --tunnels 300 --cost 2 --trials 3 --via raw|grpc --json]
// What a burst of new tunnels' first input does to an established tunnel's requests, with the
// accepting side's pacing on (maxLoopUtilization 0.5: the handshake pacer and the inbound gate,
// lib/tunnel/transport/inbound-gate.ts) and off (1), alternated. The servers run here; the probe
// and the burst each in a child process of their own. A probe tunnel, older than the gate's 10 s,
// echoes a small message every 5 ms; then N tunnels connect and, once all are up, each opens a
// stream and sends one message at the same moment, which the server answers after `cost` ms of CPU
// (an agent's modules starting up). Measured in the children: the probe's round trips during the
// burst against before it, and how long until every burst message was answered.
// --via grpc: each burst tunnel's message is a gRPC call instead (a `grpc` stream, its own HTTP/2
// connection, as an agent's modules open theirs), served by the grpc-js stream server, whose
// handler spends `cost` ms; the probe's stream then opens with a header too.
import { fork } from "node:child_process";
import { cpus, loadavg } from "node:os";
import type { Duplex } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import * as grpc from "@grpc/grpc-js";
import {
  createGrpcStreamServer,
  createTunnelChannel,
  Kind,
  openWithHeader,
  StreamDispatcher,
  serveTunnels,
  TunnelClient,
  type TunnelSession,
} from "../../lib/tunnel/index.ts";
import { NEW_FOR_MS } from "../../lib/tunnel/transport/inbound-gate.ts";
import {
  GreeterServiceClient,
  type GreeterServiceServer,
  GreeterServiceService,
} from "../../proto/gen/example/v1/greeter.ts";
import { benchArgs } from "../lib/args.ts";
import { markdownTable, percentile, round } from "../lib/stats.ts";

/** Epoch ms, comparable across the processes. */
const now = () => performance.timeOrigin + performance.now();
type Sample = { at: number; ms: number };
type Via = "raw" | "grpc";
type ToChild = { role: "probe" | "burst"; url: string; tunnels: number; via: Via };
type FromChild = { up: true } | { samples: Sample[] } | { from: number; to: number };

if (process.argv[2] === "--child") {
  process.once("message", (m: ToChild) => void (m.role === "probe" ? probeChild(m) : burstChild(m)));
} else {
  await main();
}

async function main(): Promise<void> {
  const { args, log } = benchArgs({ tunnels: "300", cost: "2", trials: "3", via: "raw" });
  if (args.via !== "raw" && args.via !== "grpc")
    throw new Error(`--via: expected raw or grpc, got ${args.via}`);
  const via: Via = args.via;
  for (const name of ["tunnels", "trials"] as const)
    if (!(Number.isInteger(Number(args[name])) && Number(args[name]) > 0))
      throw new Error(`--${name}: expected a positive integer, got ${args[name]}`);
  const cost = Number(args.cost);
  if (!(cost >= 0)) throw new Error(`--cost: expected milliseconds (>= 0), got ${args.cost}`);
  const burn = (ms: number) => {
    const until = performance.now() + ms;
    while (performance.now() < until);
  };
  const echo = (stream: Duplex) => {
    stream.on("error", () => {}); // the child's tunnels are cut when it exits
    stream.on("data", (chunk: Buffer) => {
      if (chunk[0] === 0x42) burn(cost); // "B": a burst tunnel's first message
      stream.write(chunk);
    });
    stream.on("end", () => stream.end());
  };
  // --via grpc: the burst's calls go to a grpc-js server; the probe's stream (its header says
  // `http`, for want of a kind of its own) to the same echo.
  const greeter: GreeterServiceServer = {
    sayHello: (call, cb) => {
      burn(cost);
      cb(null, { message: call.request.name });
    },
  };
  const grpcServer = new grpc.Server();
  grpcServer.addService(GreeterServiceService, greeter);
  const grpcStreams = createGrpcStreamServer(grpcServer);
  const dispatcher = new StreamDispatcher<TunnelSession>()
    .register(Kind.KIND_GRPC, (stream) => grpcStreams.inject(stream))
    .register(Kind.KIND_HTTP, (stream) => echo(stream));
  const onSession = (session: TunnelSession) =>
    session.on("stream", (stream) => {
      if (via === "raw") echo(stream);
      else {
        stream.on("error", () => {});
        void dispatcher.handle(stream, session);
      }
    });
  const modes = { paced: 0.5, unpaced: 1 } as const;
  const servers = {
    paced: await serveTunnels({ host: "127.0.0.1", maxLoopUtilization: modes.paced, onSession }),
    unpaced: await serveTunnels({ host: "127.0.0.1", maxLoopUtilization: modes.unpaced, onSession }),
  };
  log(
    `new-input: ${args.tunnels} new tunnels, ${via === "grpc" ? "a gRPC call" : "a message"} each costing ${cost} ms, ${args.trials} trials; load ${round(loadavg()[0]!, 2)} on ${cpus().length} cores`,
  );
  const results: Record<keyof typeof modes, Trial[]> = { paced: [], unpaced: [] };
  // A burst on each server first, not measured: the first trial would otherwise pay for compiling the path.
  for (const server of Object.values(servers)) await burstOnly(server.url, Number(args.tunnels), via);
  for (let t = 0; t < Number(args.trials); t++) {
    for (const mode of t % 2 === 0 ? (["unpaced", "paced"] as const) : (["paced", "unpaced"] as const)) {
      const r = await trial(servers[mode].url, Number(args.tunnels), via);
      results[mode].push(r);
      log(`  trial ${t + 1} ${mode}: probe p99 during ${round(percentile(r.during, 99), 2)} ms`);
    }
  }
  await Promise.all(Object.values(servers).map((s) => s.close(1000)));
  await grpcStreams.close(0);
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
  if (args.json) console.log(JSON.stringify({ tunnels: Number(args.tunnels), costMs: cost, via, results }));
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

function child(role: ToChild["role"], url: string, tunnels: number, via: Via) {
  const proc = fork(new URL(import.meta.url).pathname, ["--child"], { execArgv: ["--import", "tsx"] });
  proc.send({ role, url, tunnels, via } satisfies ToChild);
  const next = () => new Promise<FromChild>((resolve) => proc.once("message", resolve));
  return { proc, next };
}

async function burstOnly(url: string, tunnels: number, via: Via): Promise<void> {
  const burst = child("burst", url, tunnels, via);
  await burst.next();
  burst.proc.kill();
}

/** One trial: a probe process (its tunnel older than the gate's NEW_FOR_MS), then a burst process. */
async function trial(url: string, tunnels: number, via: Via): Promise<Trial> {
  const start = (role: ToChild["role"]) => child(role, url, tunnels, via);
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
async function probeChild({ url, via }: ToChild): Promise<void> {
  const session = await up(url);
  const stream =
    via === "raw"
      ? await session.open()
      : await openWithHeader(() => session.open(), { kind: Kind.KIND_HTTP });
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
async function burstChild({ url, tunnels, via }: ToChild): Promise<void> {
  const sessions = await Promise.all(Array.from({ length: tunnels }, () => up(url)));
  if (via === "grpc") {
    const insecure = grpc.credentials.createInsecure();
    const clients = sessions.map(
      (s) =>
        new GreeterServiceClient("tunnel", insecure, {
          channelOverride: createTunnelChannel((signal) =>
            openWithHeader(() => s.open(), { kind: Kind.KIND_GRPC }, { signal }),
          ),
        }),
    );
    const from = now();
    await Promise.all(
      clients.map(
        (c) =>
          new Promise<void>((resolve, reject) =>
            c.sayHello({ name: "B" }, (err) => (err ? reject(err) : resolve())),
          ),
      ),
    );
    process.send!({ from, to: now() } satisfies FromChild);
    return;
  }
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
