// npm run bench:wan [-- --json] [-- --rtts 20,100 --mbit 200 --single-mib 64 --multi-mib 8 --trials 3 --kube-requests 20]
// The tunnel over long links modelled in userspace (bench/lib/link.ts: a delay each way, a bandwidth
// cap, a bottleneck queue of one bandwidth-delay product), between agentk's side (this process, which
// dials) and kas's side (bench/tunnel/server.ts, a second process; the links run in a third). Bulk
// data flows from agentk's side to kas's, as API responses do. In one run: one stream and 8 streams
// through the tunnel against one and 8 raw WebSockets over the same link, at each round trip; and a
// Kubernetes list through kas over the longest link against the same list sent directly over it.
import { spawn } from "node:child_process";
import { once } from "node:events";
import os from "node:os";
import { createInterface } from "node:readline";
import { TunnelSession } from "../../lib/tunnel/session/index.ts";
import { dial } from "../../lib/tunnel/transport/index.ts";
import { benchArgs } from "../lib/args.ts";
import { bulkDuplex, bulkWs } from "../lib/bulk.ts";
import { bdpBytes } from "../lib/link.ts";
import { markdownTable, percentile, round } from "../lib/stats.ts";
import { measureWanKubeList } from "./kube-list.ts";
import { startLinks } from "./links.ts";

const { args, log } = benchArgs({
  rtts: "20,100",
  mbit: "200",
  "single-mib": "64",
  "multi-mib": "8",
  trials: "3",
  "kube-requests": "20",
  // Which parts to run (comma-separated bulk,kube).
  parts: "bulk,kube",
});
const RTTS = args.rtts.split(",").map(Number);
const BPS = Number(args.mbit) * 1e6;
const SINGLE = Number(args["single-mib"]) * 1024 * 1024;
const MULTI = Number(args["multi-mib"]) * 1024 * 1024;
const TRIALS = Number(args.trials);
const KUBE_REQUESTS = Number(args["kube-requests"]);
const parts = new Set(args.parts.split(","));
const MiB = 1024 * 1024;

// `node --cpu-prof --import tsx bench/wan/main.ts` profiles every process.
const profiling = process.execArgv.filter((a) => a.startsWith("--cpu-prof"));
const links = startLinks(profiling);

type Kind = "ws" | "tunnel";
type Shape = "single" | "multi8";
interface BulkRow {
  rttMs: number;
  shape: Shape;
  ws: number;
  tunnel: number;
  /**
   * Median over trials of tunnel / raw WebSocket within one trial: the two ran back to back, so on
   * a shared machine this ratio is the least disturbed; the target is judged on it.
   */
  pairedRatio: number;
}
const bulkRows: BulkRow[] = [];

if (parts.has("bulk")) {
  const child = spawn(
    process.execPath,
    [...profiling, "--import", "tsx", new URL("../tunnel/server.ts", import.meta.url).pathname],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  const [line] = (await once(createInterface({ input: child.stdout! }), "line")) as [string];
  const ports = JSON.parse(line) as { ws: number; tunnel: string };
  const tunnelUrl = new URL(ports.tunnel);

  for (const rtt of RTTS) {
    const name = `rtt${rtt}`;
    await links.create(name, { rttMs: rtt, bitsPerSecond: BPS });
    const wsUrl = `ws://127.0.0.1:${await links.forward(name, ports.ws)}/`;
    const viaLink = new URL(tunnelUrl);
    viaLink.port = String(await links.forward(name, Number(tunnelUrl.port)));
    // The daemons' tunnel settings: keepalive on (its first ping gives auto-tuning its RTT).
    const tunnel = new TunnelSession(await dial(viaLink.href, { maxPayload: 64 * MiB }), "client");
    const bulk: Record<Kind, (bytes: number) => Promise<void>> = {
      ws: (b) => bulkWs(wsUrl, b),
      tunnel: (b) => bulkDuplex(() => tunnel.open(), b),
    };
    const mibPerSec = async (fn: () => Promise<unknown>, bytes: number) => {
      const t0 = performance.now();
      await fn();
      return bytes / MiB / ((performance.now() - t0) / 1000);
    };
    const run: Record<Shape, (k: Kind) => Promise<number>> = {
      single: (k) => mibPerSec(() => bulk[k](SINGLE), SINGLE),
      multi8: (k) => mibPerSec(() => Promise.all(Array.from({ length: 8 }, () => bulk[k](MULTI))), 8 * MULTI),
    };
    for (const k of ["ws", "tunnel"] as Kind[]) await bulk[k](4 * MiB); // warm-up: JIT, kernel buffers
    const got: Record<Shape, Record<Kind, number[]>> = {
      single: { ws: [], tunnel: [] },
      multi8: { ws: [], tunnel: [] },
    };
    for (let t = 0; t < TRIALS; t++) {
      // Alternate which goes first, so that a noisy neighbour hurts both alike.
      const order: Kind[] = t % 2 === 0 ? ["tunnel", "ws"] : ["ws", "tunnel"];
      for (const shape of ["single", "multi8"] as Shape[]) {
        for (const k of order) got[shape][k].push(await run[shape](k));
      }
      log(
        `${rtt} ms trial ${t + 1}/${TRIALS}: single ws ${round(got.single.ws[t]!)} tunnel ${round(got.single.tunnel[t]!)}, ` +
          `8 streams ws ${round(got.multi8.ws[t]!)} tunnel ${round(got.multi8.tunnel[t]!)} MiB/s`,
      );
    }
    for (const shape of ["single", "multi8"] as Shape[]) {
      const g = got[shape];
      bulkRows.push({
        rttMs: rtt,
        shape,
        ws: percentile(g.ws, 50),
        tunnel: percentile(g.tunnel, 50),
        pairedRatio: percentile(
          g.tunnel.map((v, i) => v / g.ws[i]!),
          50,
        ),
      });
    }
    tunnel.destroy();
  }
  child.stdin!.end();
}

let kube: { rttMs: number; direct: number; kas: number } | undefined;
if (parts.has("kube")) {
  const rtt = Math.max(...RTTS);
  const name = `kube-rtt${rtt}`;
  await links.create(name, { rttMs: rtt, bitsPerSecond: BPS });
  const run = await measureWanKubeList({ links, link: name, requests: KUBE_REQUESTS, trials: TRIALS, log });
  kube = { rttMs: rtt, direct: percentile(run.direct, 50), kas: percentile(run.kas, 50) };
}
await links.close();

// ---- report ----
const load = os.loadavg().map((l) => round(l, 2));
const result = {
  link: { mbit: Number(args.mbit), rtts_ms: RTTS, queue: "one bandwidth-delay product" },
  bulk: bulkRows.map((r) => ({
    rtt_ms: r.rttMs,
    shape: r.shape,
    ws_mib_s: round(r.ws),
    tunnel_mib_s: round(r.tunnel),
    ratio_of_medians: round(r.tunnel / r.ws, 2),
    paired_ratio: round(r.pairedRatio, 2),
  })),
  ...(kube && {
    kube_list: {
      rtt_ms: kube.rttMs,
      direct_p50_ms: round(kube.direct, 1),
      kas_p50_ms: round(kube.kas, 1),
      extra_round_trips: round((kube.kas - kube.direct) / kube.rttMs, 2),
    },
  }),
  cores: os.cpus().length,
  load,
};
if (args.json) {
  process.stdout.write(`${JSON.stringify(result)}\n`);
} else {
  const met = (ok: boolean) => (ok ? "met" : "MISSED");
  const rows: Array<Array<string | number>> = bulkRows.map((r) => [
    `${r.shape === "single" ? "1 stream" : "8 streams"} MiB/s, ${r.rttMs} ms RTT (BDP ${round(bdpBytes({ rttMs: r.rttMs, bitsPerSecond: BPS }) / MiB, 2)} MiB)`,
    round(r.ws),
    round(r.tunnel),
    `${round(r.pairedRatio, 2)}x (of medians ${round(r.tunnel / r.ws, 2)}x)`,
    `>= 0.9x (${met(r.pairedRatio >= 0.9)})`,
  ]);
  if (kube) {
    const extra = (kube.kas - kube.direct) / kube.rttMs;
    rows.push([
      `kube list pods p50 ms, ${kube.rttMs} ms RTT (direct over the link / through kas, tunnel over it)`,
      round(kube.direct, 1),
      round(kube.kas, 1),
      `+${round(extra, 2)} RTT`,
      `< 1 RTT more (${met(extra < 1)})`,
    ]);
  }
  console.log(
    markdownTable(["row", "raw WebSocket / direct", "tunnel / kas", "tunnel / raw", "target"], rows),
  );
  console.log(
    `\nlink: ${args.mbit} Mbit/s each way, queue one bandwidth-delay product (backpressure, no loss), ` +
      `half the RTT each way; ${SINGLE / MiB} MiB single, 8 x ${MULTI / MiB} MiB multi, median of ${TRIALS} ` +
      `alternated trials (tunnel / raw: the median of each trial's ratio, judged; and the ratio of the medians)${kube ? `; kube list: ${KUBE_REQUESTS} sequential requests per path per trial, kept-alive connections` : ""}; ` +
      `node ${process.version}, ${os.cpus().length} cores, load ${load.join(" ")}`,
  );
}
