// The two workloads, each run unchanged against the direct and the tunnelled path.
import type { Dispatcher } from "undici";
import type { GreeterServiceClient } from "../../proto/gen/example/v1/greeter.ts";

export interface HttpRun {
  requestsPerSec: number;
  /** One per request, in ms. */
  latenciesMs: number[];
}

/**
 * A closed loop: `concurrency` workers each issue GET `origin`/ and read the whole body, until
 * `requests` have completed. Any failure fails the run: a benchmark that skips errors flatters.
 */
export async function httpLoad(
  dispatcher: Dispatcher,
  origin: string,
  requests: number,
  concurrency: number,
): Promise<HttpRun> {
  const latenciesMs: number[] = [];
  let issued = 0;
  const worker = async () => {
    while (issued < requests) {
      issued++;
      const t0 = performance.now();
      const res = await dispatcher.request({ origin, path: "/", method: "GET" });
      await res.body.arrayBuffer();
      if (res.statusCode !== 200) throw new Error(`GET ${origin}/ answered ${res.statusCode}`);
      latenciesMs.push(performance.now() - t0);
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { requestsPerSec: requests / ((performance.now() - t0) / 1000), latenciesMs };
}

/** `calls` SayHello calls one after the other; the latency of each, in µs. */
export async function grpcUnary(client: GreeterServiceClient, calls: number): Promise<number[]> {
  const latenciesUs: number[] = [];
  for (let i = 0; i < calls; i++) {
    const t0 = process.hrtime.bigint();
    await new Promise<void>((resolve, reject) =>
      client.sayHello({ name: "bench" }, (err) => (err ? reject(err) : resolve())),
    );
    latenciesUs.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  return latenciesUs;
}
