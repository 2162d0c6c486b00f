// Preloaded into kas only when the runner profiles (BENCH_SCALE_PROFILE), so kas's code needs no
// hook for the bench. Plain JavaScript: kas runs from the build, without a TypeScript loader. Each SIGUSR2 does one step and then writes done-<seq> to BENCH_SCALE_PROBE_DIR:
//   memory | snapshot: memory-<seq>.json (process.memoryUsage(), V8 heap spaces), and with
//                      "snapshot" heap-<seq>.heapsnapshot too
//   heap:              the same after forced full collections (kas started with --expose-gc)
//   cpu, cpu-connect:  odd signals start the CPU profiler, even ones write cpu-<seq>.cpuprofile
//   stalls:            stalls-<seq>.json: the event loop's stalls and the GC pauses since the
//                      last signal (from the first signal on), each with its epoch time in ms
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { join } from "node:path";
import { PerformanceObserver, performance } from "node:perf_hooks";
import v8 from "node:v8";

const dir = process.env.BENCH_SCALE_PROBE_DIR;
const mode = process.env.BENCH_SCALE_PROFILE;
let seq = 0;
/** @type {Session | undefined} */
let inspector;

/** @param {number} n */
async function step(n) {
  if (mode === "cpu" || mode === "cpu-connect") {
    if (!inspector) {
      inspector = new Session();
      inspector.connect();
      await inspector.post("Profiler.enable");
      await inspector.post("Profiler.start");
    } else {
      const { profile } = await inspector.post("Profiler.stop");
      writeFileSync(join(dir, `cpu-${n}.cpuprofile`), JSON.stringify(profile));
      inspector.disconnect();
      inspector = undefined;
    }
    return;
  }
  if (mode === "stalls") {
    if (n > 0) writeFileSync(join(dir, `stalls-${n}.json`), JSON.stringify(stalls.take()));
    stalls.start();
    return;
  }
  if (mode === "heap") {
    // Twice: the first collection's finalizers (WeakRefs, FinalizationRegistry) free more.
    globalThis.gc();
    await new Promise((r) => setImmediate(r));
    globalThis.gc();
  }
  if (mode === "snapshot") v8.writeHeapSnapshot(join(dir, `heap-${n}.heapsnapshot`));
  const memory = { usage: process.memoryUsage(), spaces: v8.getHeapSpaceStatistics() };
  writeFileSync(join(dir, `memory-${n}.json`), JSON.stringify(memory));
}

/** A stall: the loop held `ms` beyond the sampler's period, ending at `end`. */
const STALL_SAMPLE_MS = 10;
const STALL_MIN_MS = 20;
const stalls = {
  /** @type {{ end: number, ms: number }[]} */
  loop: [],
  /** @type {{ start: number, ms: number, kind: number }[]} */
  gc: [],
  /** @type {NodeJS.Timeout | undefined} */
  timer: undefined,
  /** @type {PerformanceObserver | undefined} */
  observer: undefined,
  start() {
    if (this.timer) return;
    let last = performance.now();
    this.timer = setInterval(() => {
      const now = performance.now();
      const held = now - last - STALL_SAMPLE_MS;
      if (held >= STALL_MIN_MS) this.loop.push({ end: performance.timeOrigin + now, ms: held });
      last = now;
    }, STALL_SAMPLE_MS);
    this.observer = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        const kind = /** @type {{ kind: number } | undefined} */ (e.detail)?.kind ?? 0;
        this.gc.push({ start: performance.timeOrigin + e.startTime, ms: e.duration, kind });
      }
    });
    this.observer.observe({ entryTypes: ["gc"] });
  },
  take() {
    const out = { loop: this.loop, gc: this.gc };
    this.loop = [];
    this.gc = [];
    return out;
  },
};

if (dir) {
  process.on("SIGUSR2", () => {
    const n = seq++;
    void step(n).then(() => writeFileSync(join(dir, `done-${n}`), ""));
  });
}
