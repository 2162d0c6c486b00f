// Preloaded into kas only when the runner profiles (BENCH_SCALE_PROFILE), so kas's code needs no
// hook for the bench. Plain JavaScript: kas runs from the build, without a TypeScript loader. Each SIGUSR2 does one step and then writes done-<seq> to BENCH_SCALE_PROBE_DIR:
//   memory | snapshot: memory-<seq>.json (process.memoryUsage(), V8 heap spaces), and with
//                      "snapshot" heap-<seq>.heapsnapshot too
//   heap:              the same after forced full collections (kas started with --expose-gc)
//   cpu:               odd signals start the CPU profiler, even ones write cpu-<seq>.cpuprofile
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { join } from "node:path";
import v8 from "node:v8";

const dir = process.env.BENCH_SCALE_PROBE_DIR;
const mode = process.env.BENCH_SCALE_PROFILE;
let seq = 0;
/** @type {Session | undefined} */
let inspector;

/** @param {number} n */
async function step(n) {
  if (mode === "cpu") {
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

if (dir) {
  process.on("SIGUSR2", () => {
    const n = seq++;
    void step(n).then(() => writeFileSync(join(dir, `done-${n}`), ""));
  });
}
