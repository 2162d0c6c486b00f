// Who retains kas's heap per agent: two heap snapshots of one kas (before any agent, with N), each
// node's retained size from the dominator tree (weak edges do not retain), then what grew, per agent:
//   - by constructor: the retained size of its outermost instances (those not dominated by another
//     instance of the same constructor), as DevTools' "Summary" view shows it;
//   - --owners A,B: every node charged to its nearest dominator whose constructor is listed (the
//     first in that list wins where several dominate it), else "(other)";
//   - --depth D: to its nearest D dominators with a constructor of their own ("outer > inner";
//     HEAP_OWNERS_NONE=K names the first K generic dominators of what no named one holds);
//   - --areas: the same (depth 1, stream states, buffers and timers charged to what holds them),
//     grouped by the code that keeps them (AREAS below): the per-agent table of BENCHMARKS.md;
//   - --by-property: retained size by "owner.property" (what each owner holds by which field);
//   - --prop "LABEL.property", --path LABEL: dominator chains of a few instances.
// npx tsx bench/scale/heap-owners.ts BEFORE.heapsnapshot AFTER.heapsnapshot N [--top 40] [options above]
// (BENCH_SCALE_KEEP=1 BENCH_SCALE_PROFILE=snapshot npm run bench:scale -- --modules ... keeps the pair.)
import { readFileSync } from "node:fs";

interface RawSnapshot {
  snapshot: {
    meta: {
      node_fields: string[];
      node_types: [string[], ...unknown[]];
      edge_fields: string[];
      edge_types: [string[], ...unknown[]];
    };
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}

export interface Graph {
  count: number;
  /** "type:name" of each node (strings as one bucket). */
  label: string[];
  self: Float64Array;
  retained: Float64Array;
  idom: Int32Array;
  /** Child lists in the dominator tree. */
  children: number[][];
  /** The name of the edge from each node's dominator that leads to it, where one does ("" else). */
  via: string[];
}

export function loadGraph(path: string): Graph {
  const raw = JSON.parse(readFileSync(path, "utf8")) as RawSnapshot;
  const meta = raw.snapshot.meta;
  const nf = meta.node_fields.length;
  const ef = meta.edge_fields.length;
  const nTypes = meta.node_types[0];
  const eTypes = meta.edge_types[0];
  const [iType, iName, iSize, iEdges] = ["type", "name", "self_size", "edge_count"].map((f) =>
    meta.node_fields.indexOf(f),
  ) as [number, number, number, number];
  const [eType, eName, eTo] = ["type", "name_or_index", "to_node"].map((f) =>
    meta.edge_fields.indexOf(f),
  ) as [number, number, number];
  const weak = eTypes.indexOf("weak");
  const count = raw.nodes.length / nf;
  const label: string[] = new Array(count);
  const self = new Float64Array(count);
  const firstEdge = new Int32Array(count + 1);
  let e = 0;
  for (let i = 0; i < count; i++) {
    const type = nTypes[raw.nodes[i * nf + iType]!]!;
    const name =
      type === "string" || type === "concatenated string" || type === "sliced string"
        ? "(strings)"
        : raw.strings[raw.nodes[i * nf + iName]!]!.slice(0, 60);
    label[i] = `${type}:${name}`;
    self[i] = raw.nodes[i * nf + iSize]!;
    firstEdge[i] = e;
    e += raw.nodes[i * nf + iEdges]! * ef;
  }
  firstEdge[count] = e;
  const succ = (i: number, f: (j: number) => void) => {
    for (let k = firstEdge[i]!; k < firstEdge[i + 1]!; k += ef) {
      if (raw.edges[k + eType] === weak) continue;
      f(raw.edges[k + eTo]! / nf);
    }
  };
  // Postorder from the root (node 0), iteratively.
  const order = new Int32Array(count).fill(-1); // postorder number
  const post: number[] = [];
  const stack: number[] = [0];
  const cursor = new Int32Array(count);
  const seen = new Uint8Array(count);
  seen[0] = 1;
  for (let i = 0; i < count; i++) cursor[i] = firstEdge[i]!;
  while (stack.length > 0) {
    const v = stack[stack.length - 1]!;
    let pushed = false;
    while (cursor[v]! < firstEdge[v + 1]!) {
      const k = cursor[v]!;
      cursor[v] = k + ef;
      if (raw.edges[k + eType] === weak) continue;
      const w = raw.edges[k + eTo]! / nf;
      if (!seen[w]) {
        seen[w] = 1;
        stack.push(w);
        pushed = true;
        break;
      }
    }
    if (!pushed) {
      stack.pop();
      order[v] = post.length;
      post.push(v);
    }
  }
  const preds: number[][] = Array.from({ length: count }, () => []);
  for (const v of post) succ(v, (w) => preds[w]!.push(v));
  // Cooper, Harvey, Kennedy: "A Simple, Fast Dominance Algorithm".
  const idom = new Int32Array(count).fill(-1);
  idom[0] = 0;
  const intersect = (a: number, b: number) => {
    while (a !== b) {
      while (order[a]! < order[b]!) a = idom[a]!;
      while (order[b]! < order[a]!) b = idom[b]!;
    }
    return a;
  };
  for (let changed = true; changed; ) {
    changed = false;
    for (let p = post.length - 2; p >= 0; p--) {
      const v = post[p]!;
      let d = -1;
      for (const u of preds[v]!) {
        if (idom[u] === -1) continue;
        d = d === -1 ? u : intersect(u, d);
      }
      if (d !== -1 && idom[v] !== d) {
        idom[v] = d;
        changed = true;
      }
    }
  }
  const retained = new Float64Array(count);
  const children: number[][] = Array.from({ length: count }, () => []);
  for (const v of post) {
    retained[v]! += self[v]!;
    if (v !== 0) {
      retained[idom[v]!]! += retained[v]!;
      children[idom[v]!]!.push(v);
    }
  }
  const via = new Array<string>(count).fill("");
  for (let v = 0; v < count; v++) {
    for (let k = firstEdge[v]!; k < firstEdge[v + 1]!; k += ef) {
      const w = raw.edges[k + eTo]! / nf;
      if (idom[w] !== v || via[w] !== "") continue;
      const t = eTypes[raw.edges[k + eType]!];
      via[w] = t === "element" || t === "hidden" ? `[${t}]` : String(raw.strings[raw.edges[k + eName]!]);
    }
  }
  return { count, label, self, retained, idom, children, via };
}

/** Retained bytes of each constructor's outermost instances, and their count. */
export function retainedByLabel(g: Graph): Map<string, { bytes: number; count: number }> {
  const out = new Map<string, { bytes: number; count: number }>();
  const walk = (v: number, inside: Set<string>) => {
    // Iterative DFS over the dominator tree, carrying the labels above each node.
    const stack: Array<[number, boolean]> = [[v, false]];
    while (stack.length > 0) {
      const [n, leaving] = stack.pop()!;
      const l = g.label[n]!;
      if (leaving) {
        inside.delete(l);
        continue;
      }
      if (!inside.has(l)) {
        const e = out.get(l) ?? { bytes: 0, count: 0 };
        e.bytes += g.retained[n]!;
        e.count++;
        out.set(l, e);
        inside.add(l);
        stack.push([n, true]);
      }
      for (const c of g.children[n]!) stack.push([c, false]);
    }
  };
  walk(0, new Set());
  return out;
}

/** Self bytes charged to the nearest dominating owner (by `owners`' order of precedence). */
export function selfByOwner(g: Graph, owners: string[]): Map<string, number> {
  const rank = new Map(owners.map((o, i) => [o, i]));
  const out = new Map<string, number>();
  // Top-down: each node's owner from its dominator's, unless it is an owner itself.
  const owner = new Array<string>(g.count);
  owner[0] = "(other)";
  const stack = [0];
  while (stack.length > 0) {
    const v = stack.pop()!;
    const mine = g.label[v]!.replace(/^[^:]*:/, "");
    const parent = v === 0 ? "(other)" : owner[g.idom[v]!]!;
    const r = rank.get(mine);
    const pr = rank.get(parent);
    owner[v] = r !== undefined && (pr === undefined || r <= pr) ? mine : parent;
    out.set(owner[v]!, (out.get(owner[v]!) ?? 0) + g.self[v]!);
    for (const c of g.children[v]!) stack.push(c);
  }
  return out;
}

function diff<T>(a: Map<string, T>, b: Map<string, T>, val: (x: T | undefined) => number, agents: number) {
  return [...new Set([...a.keys(), ...b.keys()])]
    .map((k) => ({ key: k, perAgent: (val(b.get(k)) - val(a.get(k))) / agents }))
    .sort((x, y) => y.perAgent - x.perAgent);
}

/**
 * Retained bytes by "owner.property": for each node, what its dominator holds it by, summed, the
 * owner being the dominator's label. Only the outermost such node counts (nested ones are inside).
 */
export function retainedByProperty(g: Graph): Map<string, number> {
  const out = new Map<string, number>();
  for (let v = 1; v < g.count; v++) {
    if (g.idom[v] === -1 || g.via[v] === "" || g.via[v]!.startsWith("[")) continue;
    // The owner, and the nearest named object above it (what a plain object or closure belongs to).
    let named = g.idom[v]!;
    while (named !== 0 && GENERIC.test(g.label[named]!)) named = g.idom[named]!;
    const where = named === g.idom[v] ? "" : `${named === 0 ? "(root)" : g.label[named]} > `;
    const key = `${where}${g.label[g.idom[v]!]}.${g.via[v]}`;
    out.set(key, (out.get(key) ?? 0) + g.retained[v]!);
  }
  return out;
}

const GENERIC =
  /^(object:(Object|Array|Map|Set|WeakMap|system \/ .*|)|closure:.*|array:.*|hidden:.*|string:.*|concatenated string:.*|sliced string:.*|number:.*|code:.*|object shape:.*|native:system .*|synthetic:.*)$/;

/**
 * Self bytes charged to each node's nearest dominators that have a constructor of their own (not
 * Object, Array, Map, closures...): "outer > inner", `depth` of them from the inside.
 */
export function selfByNamedOwner(g: Graph, depth: number, transparent?: RegExp): Map<string, number> {
  const out = new Map<string, number>();
  const chain = new Array<string[]>(g.count);
  chain[0] = [];
  const stack = [0];
  while (stack.length > 0) {
    const v = stack.pop()!;
    const up = v === 0 ? [] : chain[g.idom[v]!]!;
    const l = g.label[v]!;
    chain[v] =
      GENERIC.test(l) || transparent?.test(l) || v === 0
        ? up
        : [...up.slice(-(depth - 1) || up.length), l.replace(/^object:/, "")];
    if (depth === 1 && chain[v]!.length > 1) chain[v] = chain[v]!.slice(-1);
    let key = chain[v]!.join(" > ");
    if (!key) {
      // Held by no named object: say where, by the generic dominators up to the root's child.
      const up: string[] = [];
      for (let u = v; u !== 0 && up.length < 12; u = g.idom[u]!) up.push(g.label[u]!);
      key = `(none) ${process.env.HEAP_OWNERS_NONE ? up.reverse().slice(0, Number(process.env.HEAP_OWNERS_NONE)).join(" > ") : ""}`;
      if (transparent) key = /^(code|object shape):/.test(l) ? "(none) code" : "(none) data";
    }
    out.set(key, (out.get(key) ?? 0) + g.self[v]!);
    for (const c of g.children[v]!) stack.push(c);
  }
  return out;
}

/**
 * kas's areas, by the nearest named owner (selfByNamedOwner with depth 1): which code keeps the
 * object. Owners not listed, and objects no named owner dominates, are "other" (code, shared
 * structures, what is held from several places).
 */
const AREAS: Array<[string, RegExp]> = [
  [
    "node:http2 (native, not in heapUsed)",
    /^native:Node \/ (nghttp2_memory|Http2Session|streams|pair)$|^synthetic:Node \/ Http2Stream$/,
  ],
  [
    "node:http2 session and streams (JS)",
    /^(ServerHttp2Session|Http2Session|ServerHttp2Stream|Http2Stream|JSStreamSocket|JSStream|native:Node \/ JSStream)$/,
  ],
  [
    "grpc-js server calls",
    /^(BaseServerInterceptingCall|InterceptingServerListenerImpl|StreamDecoder|ServerInterceptingCall|Metadata|ServerWritableStreamImpl|ServerReadableStreamImpl|ServerDuplexStreamImpl|ServerUnaryCallImpl|PerRequestMetricRecorder)$/,
  ],
  [
    "tunnel: WebSocket, yamux, TCP socket (lib/tunnel)",
    /^(TunnelSession|WebSocket|Receiver|Sender|Session|FrameDecoder|FrameWriter|YamuxStream|Socket|TCP|TransportConnection|Duplex|SessionHost|AgentToken|native:Node \/ TCPSocketWrap|synthetic:Node \/ TCPSocketWrap)$/,
  ],
  ["router registry (lib/router)", /^(LocalRegistry|TunnelAcceptor)$/],
  ["cmd/kas: tunnel admission, slots", /^(TunnelSlots|TunnelAdmission|ConnectionRate)$/],
  ["cluster views (hub, store)", /^(Hub|MemoryViewsStore)$/],
  [
    "gitops (streams, status, watches)",
    /^(ManifestStream|MemoryStatusStore|RefWatches|AbortController|EventTarget|AbortSignal)$/,
  ],
  ["configuration (watches)", /^(ConfigurationWatches)$/],
  ["repository caches", /^(CachedRepositories)$/],
];

export function areaOf(owner: string): string {
  const name = owner.replace(/^object:/, "");
  if (name === "(none) data") return "held from several places (no one named owner)";
  return AREAS.find(([, re]) => re.test(name))?.[0] ?? `other: ${name}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [before, after, n, ...rest] = process.argv.slice(2);
  const opt = (name: string) => {
    const i = rest.indexOf(`--${name}`);
    return i >= 0 ? rest[i + 1] : undefined;
  };
  const agents = Number(n);
  const top = Number(opt("top") ?? 40);
  const owners = (opt("owners") ?? "").split(",").filter(Boolean);
  const a = loadGraph(before!);
  const b = loadGraph(after!);
  console.log(`retained heap growth per agent: ${((b.retained[0]! - a.retained[0]!) / agents).toFixed(0)} B`);
  console.log("\nby constructor (outermost instances' retained size), B per agent, count per agent:");
  const ra = retainedByLabel(a);
  const rb = retainedByLabel(b);
  for (const d of diff(ra, rb, (x) => x?.bytes ?? 0, agents).slice(0, top)) {
    const c = ((rb.get(d.key)?.count ?? 0) - (ra.get(d.key)?.count ?? 0)) / agents;
    console.log(`${d.perAgent.toFixed(0).padStart(8)}  x${c.toFixed(2).padStart(6)}  ${d.key}`);
  }
  if (owners.length > 0) {
    console.log("\nby owner (self size charged to the nearest dominating owner), B per agent:");
    const oa = selfByOwner(a, owners);
    const ob = selfByOwner(b, owners);
    for (const d of diff(oa, ob, (x) => x ?? 0, agents))
      console.log(`${d.perAgent.toFixed(0).padStart(8)}  ${d.key}`);
  }
  if (rest.includes("--by-property")) {
    console.log(
      "\nby property (retained size of what each owner holds by it; nested ones overlap), B per agent:",
    );
    const pa = retainedByProperty(a);
    const pb = retainedByProperty(b);
    for (const d of diff(pa, pb, (x) => x ?? 0, agents).slice(0, top))
      console.log(`${d.perAgent.toFixed(0).padStart(8)}  ${d.key}`);
  }
  const prop = opt("prop"); // "owner label.property": a few instances' dominator chains
  if (prop) {
    const dot = prop.lastIndexOf(".");
    const [owner, name] = [prop.slice(0, dot), prop.slice(dot + 1)];
    const hits = [...b.label.keys()].filter(
      (v) => b.via[v] === name && b.idom[v] !== -1 && b.label[b.idom[v]!] === owner,
    );
    for (const h of hits.slice(-3)) console.log(`\n${chainOf(b, h)}`);
  }
  const path = opt("path");
  if (path) {
    // The dominator chains of a few instances of a label (the last ones: likely an agent's).
    const hits = [...b.label.keys()].filter((i) => b.label[i] === path).slice(-3);
    for (const h of hits) {
      const chain: string[] = [];
      for (let v = h; v !== 0; v = b.idom[v]!) chain.push(`${b.label[v]} (${b.retained[v]} B)`);
      console.log(`\n${chain.join("\n  <- ")}`);
    }
  }
  if (rest.includes("--areas")) {
    console.log("\nby area (self size charged to the nearest named owner, grouped), KiB per agent:");
    // Parts of streams, buffers and timers: charged to what holds them.
    const parts =
      /^object:(WritableState|ReadableState|Buffer|ArrayBuffer|Uint8Array|Timeout|TimersList|EventEmitter|Promise|Date)$/;
    const na = selfByNamedOwner(a, 1, parts);
    const nb = selfByNamedOwner(b, 1, parts);
    const areas = new Map<string, number>();
    for (const d of diff(na, nb, (x) => x ?? 0, agents)) {
      const area =
        d.key === "(none) code"
          ? "code and shapes (compiled on first use: fixed, not per agent)"
          : areaOf(d.key);
      areas.set(area, (areas.get(area) ?? 0) + d.perAgent);
    }
    for (const [area, bytes] of [...areas].sort((x, y) => y[1] - x[1]))
      console.log(`${(bytes / 1024).toFixed(2).padStart(7)}  ${area}`);
  }
  const depth = Number(opt("depth") ?? 0);
  if (depth > 0) {
    console.log(
      `\nby named owner (nearest ${depth} dominators with a constructor of their own), B per agent:`,
    );
    const na = selfByNamedOwner(a, depth);
    const nb = selfByNamedOwner(b, depth);
    for (const d of diff(na, nb, (x) => x ?? 0, agents).slice(0, top))
      console.log(`${d.perAgent.toFixed(0).padStart(8)}  ${d.key}`);
  }
}

/** A node's dominator chain, each step with the edge that leads to it. */
export function chainOf(g: Graph, v: number): string {
  const steps: string[] = [];
  for (let u = v; u !== 0; u = g.idom[u]!)
    steps.push(`${g.label[u]}${g.via[u] ? ` (via ${g.via[u]})` : ""} ${g.retained[u]} B`);
  return steps.join("\n    <- ");
}
