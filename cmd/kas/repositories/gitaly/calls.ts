// Running one grpc-js call under a caller's AbortSignal: an abort cancels the call (CANCELLED,
// mapped to "aborted"); a stream can be stopped early without reading the rest.
import type { ClientReadableStream, ClientUnaryCall, ServiceError } from "@grpc/grpc-js";
import { RepositoryError } from "../../../../modules/runtime/repositories.ts";

export function unaryCall<T>(
  start: (callback: (err: ServiceError | null, response: T) => void) => ClientUnaryCall,
  signal: AbortSignal | undefined,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const call = start((err, response) => {
      signal?.removeEventListener("abort", onAbort);
      if (err) reject(err);
      else resolve(response);
    });
    const onAbort = () => call.cancel();
    if (signal?.aborted) call.cancel();
    else signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * A running total of what a stream brought: `add(n)` throws a `too_large` RepositoryError saying
 * `over()` once the total passes `max` (the stream then stops: see consumeStream).
 */
export function cappedTotal(max: number, over: () => string): (n: number) => void {
  let total = 0;
  return (n) => {
    total += n;
    if (total > max) throw new RepositoryError("too_large", over());
  };
}

/** What to do after a message: keep reading, or cancel the call and resolve. */
export type StreamStep = "continue" | "stop";

/**
 * Feeds every message of `call` to `onMessage` until the stream ends or `onMessage` says stop (or
 * throws: the call is cancelled and the promise rejects with what it threw).
 */
export function consumeStream<T>(
  call: ClientReadableStream<T>,
  onMessage: (message: T) => StreamStep,
  signal: AbortSignal | undefined,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const finish = (err?: unknown) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener("abort", onAbort);
      if (err === undefined) resolve();
      else reject(err);
    };
    const onAbort = () => call.cancel();
    call.on("data", (message: T) => {
      if (settled) return;
      let step: StreamStep;
      try {
        step = onMessage(message);
      } catch (err) {
        call.cancel();
        finish(err);
        return;
      }
      if (step === "stop") {
        call.cancel();
        finish();
      }
    });
    // After a stop, the CANCELLED status that follows is expected and ignored.
    call.on("error", (err) => finish(err));
    call.on("end", () => finish());
    if (signal?.aborted) call.cancel();
    else signal?.addEventListener("abort", onAbort, { once: true });
  });
}
