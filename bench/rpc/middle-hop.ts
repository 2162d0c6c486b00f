// npx tsx bench/rpc/middle-hop.ts [-- --json] [-- --blocks 10 --requests 400 --body 7101]
// The kas -> agentk hop of a Kubernetes API request alone, in one process, as kube-list.ts runs it:
// what carrying one request and its answer costs, three ways, alternated in blocks.
// - tcp: undici Pool -> node:http server over loopback TCP (the floor's middle hop, bare-proxies.ts).
// - tunnel http/1.1: TunnelDispatcher -> serveHttp over one tunnel (what kas and agentk speak today).
// - tunnel framed: the same tunnel, one kept-open stream, the request as one length-prefixed JSON
//   head and the answer as a length-prefixed JSON head and body: the least a structured
//   request/response protocol between kas and agentk (GitLab's kas sends gRPC HttpRequest messages)
//   would cost. Not a protocol of this project: a bound, with no streaming bodies, errors or pooling.
// The answer is a body of kube-list.ts's size (a Table of 20 pods) with an API server's headers.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { Pool } from "undici";
import {
  Kind,
  openWithHeader,
  StreamDispatcher,
  serveHttp,
  serveTunnels,
  TunnelClient,
  TunnelDispatcher,
  type TunnelSession,
} from "../../lib/tunnel/index.ts";
import { benchArgs } from "../lib/args.ts";
import { markdownTable, percentile, round } from "../lib/stats.ts";

const { args, log } = benchArgs({ blocks: "10", requests: "400", body: "7101" });
const BLOCKS = Number(args.blocks);
const REQUESTS = Number(args.requests);
const BODY = Buffer.alloc(Number(args.body), "x");
const PATH = "/api/v1/namespaces/default/pods?limit=500";
const REQUEST_HEADERS = {
  accept: "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
  "user-agent": "kubectl/bench",
  "kas-identity": "ci_job:1:0123456789abcdef0123456789abcdef01234567",
};
const RESPONSE_HEADERS = {
  "audit-id": "6f1c7a1e-7a4e-4c4f-9a52-2b8e0c3a1f9d",
  "cache-control": "no-cache, private",
  "content-type": "application/json",
  "x-kubernetes-pf-flowschema-uid": "3f1b1f26-2b5c-4b1e-9d6a-0c5f2f1c9a11",
  "x-kubernetes-pf-prioritylevel-uid": "b2a2d5b4-7f0a-4e0e-8a53-1f3e6c7d8e9f",
  "content-length": String(BODY.length),
};

// ---- agentk's side: one HTTP server, reached over TCP and over tunnel streams of both kinds ----
const http = createServer((_req, res) => {
  res.writeHead(200, { ...RESPONSE_HEADERS, date: new Date().toUTCString() });
  res.end(BODY);
});
http.keepAliveTimeout = 60_000;
await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
const FRAMED = 100 as Kind; // unassigned: this bench's own
const served = serveHttp(http);
const dispatcher = new StreamDispatcher<TunnelSession>()
  .register(Kind.KIND_HTTP, (stream) => served.handle(stream))
  .register(FRAMED, (stream) => answerFramed(stream));

/** Each request head read from `stream` answered with a head and the body, as length-prefixed frames. */
function answerFramed(stream: Duplex): void {
  const frames = new FrameReader();
  stream.on("data", (chunk: Buffer) => {
    for (const frame of frames.push(chunk)) {
      JSON.parse(frame.toString()); // the request head, as agentk would read it
      const head = { status: 200, headers: { ...RESPONSE_HEADERS, date: new Date().toUTCString() } };
      stream.write(Buffer.concat([frame4(Buffer.from(JSON.stringify(head))), frame4(BODY)]));
    }
  });
}

function frame4(body: Buffer): Buffer {
  const out = Buffer.allocUnsafe(4 + body.length);
  out.writeUInt32BE(body.length, 0);
  body.copy(out, 4);
  return out;
}

/** Splits a byte stream into length-prefixed frames (bounded: a frame over 1 MiB is an error). */
class FrameReader {
  #buffer: Buffer = Buffer.alloc(0);

  *push(chunk: Buffer): Generator<Buffer> {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    while (this.#buffer.length >= 4) {
      const length = this.#buffer.readUInt32BE(0);
      if (length > 1 << 20) throw new Error(`frame of ${length} bytes`);
      if (this.#buffer.length < 4 + length) return;
      yield this.#buffer.subarray(4, 4 + length);
      this.#buffer = this.#buffer.subarray(4 + length);
    }
  }
}

let sessionUp!: (s: TunnelSession) => void;
const session = new Promise<TunnelSession>((resolve) => {
  sessionUp = resolve;
});
const tunnels = await serveTunnels({ host: "127.0.0.1", onSession: (s) => sessionUp(s) });
const agent = new TunnelClient({
  url: tunnels.url,
  onStream: (stream, s) => void dispatcher.handle(stream, s),
}).start();
await agent.ready(10_000);
const tunnel = await session; // kas's end: it opens the streams, as kas does toward agentk

// ---- kas's side: the three ways ----
const tcp = new Pool(`http://127.0.0.1:${(http.address() as AddressInfo).port}`);
const overTunnel = new TunnelDispatcher(
  (_origin, { signal }) =>
    openWithHeader(() => tunnel.open(), { kind: Kind.KIND_HTTP, service: "kubernetes" }, { signal }),
  { maxStreams: 4 },
);
const framedStream = await openWithHeader(() => tunnel.open(), { kind: FRAMED, service: "kubernetes" });
const answers = new FrameReader();
const waiting: Array<(frames: Buffer[]) => void> = [];
let got: Buffer[] = [];
framedStream.on("data", (chunk: Buffer) => {
  for (const frame of answers.push(chunk)) {
    got.push(Buffer.from(frame));
    if (got.length === 2) {
      const frames = got;
      got = [];
      waiting.shift()!(frames);
    }
  }
});

async function viaUndici(d: Pool | TunnelDispatcher): Promise<number> {
  const t0 = performance.now();
  const res = await d.request({
    origin: "http://kubernetes",
    path: PATH,
    method: "GET",
    headers: REQUEST_HEADERS,
  });
  const body = Buffer.from(await res.body.arrayBuffer());
  if (res.statusCode !== 200 || body.length !== BODY.length) throw new Error(`bad answer ${res.statusCode}`);
  return performance.now() - t0;
}

async function viaFrames(): Promise<number> {
  const t0 = performance.now();
  const answered = new Promise<Buffer[]>((resolve) => waiting.push(resolve));
  framedStream.write(
    frame4(Buffer.from(JSON.stringify({ method: "GET", path: PATH, headers: REQUEST_HEADERS }))),
  );
  const [head, body] = await answered;
  if ((JSON.parse(head!.toString()) as { status: number }).status !== 200 || body!.length !== BODY.length)
    throw new Error("bad framed answer");
  return performance.now() - t0;
}

const ways = {
  tcp: () => viaUndici(tcp),
  "tunnel http/1.1": () => viaUndici(overTunnel),
  "tunnel framed": viaFrames,
} as const;
type Way = keyof typeof ways;
const names = Object.keys(ways) as Way[];

log("warming up…");
for (const w of names) for (let i = 0; i < 1000; i++) await ways[w]();
const p50s: Record<Way, number[]> = { tcp: [], "tunnel http/1.1": [], "tunnel framed": [] };
const cpus: Record<Way, number[]> = { tcp: [], "tunnel http/1.1": [], "tunnel framed": [] };
for (let b = 0; b < BLOCKS; b++) {
  const order = b % 2 === 0 ? names : [...names].reverse();
  for (const w of order) {
    const latencies: number[] = [];
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < REQUESTS; i++) latencies.push(await ways[w]());
    const cpu = process.cpuUsage(cpu0);
    p50s[w].push(percentile(latencies, 50) * 1000);
    cpus[w].push((cpu.user + cpu.system) / REQUESTS);
  }
  log(`block ${b + 1}/${BLOCKS}`);
}
const median = (xs: number[]) => percentile(xs, 50);
const result = Object.fromEntries(
  names.map((w) => [w, { p50_us: round(median(p50s[w])), cpu_us_per_request: round(median(cpus[w])) }]),
) as Record<Way, { p50_us: number; cpu_us_per_request: number }>;
if (args.json)
  process.stdout.write(
    `${JSON.stringify({ blocks: BLOCKS, requests: REQUESTS, body: BODY.length, ...result })}\n`,
  );
else {
  console.log(
    markdownTable(
      ["kas -> agentk hop", "p50 µs", "CPU µs per request (process)", "p50 against tcp"],
      names.map((w) => [
        w,
        result[w].p50_us,
        result[w].cpu_us_per_request,
        `${round(result[w].p50_us / result.tcp.p50_us, 2)}x`,
      ]),
    ),
  );
  console.log(
    `\n${BLOCKS} alternated blocks of ${REQUESTS} sequential requests per way, medians of the blocks' p50s; answer body ${BODY.length} B; one process`,
  );
}
await Promise.all([tcp.close(), overTunnel.close(), agent.close(100), tunnels.close(100)]);
http.close();
process.exit(0);
