// Kubernetes API requests through kas's proxy to the probe agent on the surviving replica, paced,
// each with its start time, so that the runner can take the p99 before the herd and during it.
import { setTimeout as sleep } from "node:timers/promises";
import { Agent } from "undici";

const PATH = "/api/v1/namespaces/default/pods?limit=500";
/** A request not answered within this counts as failed (its time still counts, as the deadline). */
const REQUEST_TIMEOUT_MS = 30_000;

export interface ProbeSample {
  /** performance.now() at its start. */
  at: number;
  ms: number;
  ok: boolean;
}

export interface KubeProbe {
  samples: ProbeSample[];
  stop(): Promise<void>;
}

/** `clients` loops, each starting a request every `intervalMs` (or when its last one ends, if later). */
export function startKubeProbe(o: {
  kubernetesApi: string;
  token: string;
  clients: number;
  intervalMs: number;
}): KubeProbe {
  const dispatcher = new Agent({ connections: o.clients });
  const samples: ProbeSample[] = [];
  let running = true;
  const loop = async () => {
    while (running) {
      const at = performance.now();
      let ok = false;
      try {
        const res = await dispatcher.request({
          origin: o.kubernetesApi,
          path: PATH,
          method: "GET",
          headers: { authorization: `Bearer ${o.token}`, "user-agent": "kubectl/bench-herd" },
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
        await res.body.text();
        ok = res.statusCode === 200;
      } catch {
        ok = false;
      }
      const ms = performance.now() - at;
      samples.push({ at, ms, ok });
      await sleep(Math.max(0, o.intervalMs - ms));
    }
  };
  const loops = Array.from({ length: o.clients }, loop);
  return {
    samples,
    async stop() {
      running = false;
      await Promise.all(loops);
      await dispatcher.close();
    },
  };
}
