// agentk's long-lived streams to kas (a configuration feed, a manifest feed, a views push): one
// stream at a time over the tunnel's gRPC channel, opened again after each end (a tunnel rotating,
// kas draining: UNAVAILABLE) with backoff and jitter, until the module stops.
import { setTimeout as sleep } from "node:timers/promises";
import * as grpc from "@grpc/grpc-js";
import type { Logger } from "../../tool/observability/index.ts";

/** Delays between two streams: from `initialMs`, doubling up to `maxMs`. */
export interface StreamBackoff {
  initialMs: number;
  maxMs: number;
}

/** The delays agentk's modules use unless told otherwise. */
export const DEFAULT_STREAM_BACKOFF: StreamBackoff = { initialMs: 250, maxMs: 30_000 };

/** A stream that lasted this long was healthy, whatever ended it (a tunnel rotating, kas draining). */
export const HEALTHY_STREAM_MS = 10_000;

/**
 * Runs `stream` again and again until `signal` aborts. `stream` opens one stream and resolves when
 * it ends, with whether it went well: the next one then opens after the initial delay, otherwise
 * after a delay that doubles each time (with jitter: half to one and a half of it).
 */
export async function followStreams(
  signal: AbortSignal,
  backoff: StreamBackoff,
  stream: (signal: AbortSignal) => Promise<boolean>,
): Promise<void> {
  let delay = backoff.initialMs;
  while (!signal.aborted) {
    if (await stream(signal)) delay = backoff.initialMs;
    if (signal.aborted) break;
    await sleep(delay / 2 + Math.random() * delay, undefined, { signal }).catch(() => {});
    delay = Math.min(delay * 2, backoff.maxMs);
  }
}

export interface StreamEndOptions {
  /** Whether the stream brought something (then it went well, whatever ended it). */
  received: () => boolean;
  /** Codes that end a stream in the ordinary course (UNAVAILABLE: the tunnel went): not logged. */
  quiet: readonly grpc.status[];
  log: Logger;
  /** Logged (warn) for any other error, unless `signal` aborted. */
  message: string;
}

/**
 * Ties a server-streaming `call` to `signal` (cancelled when it aborts) and resolves when it ends,
 * with whether it went well: it brought something, ended with OK (kas sends nothing to an agent
 * that is up to date, so silence is no failure), or lasted {@link HEALTHY_STREAM_MS}.
 */
export function streamEnd(
  call: grpc.ClientReadableStream<unknown>,
  signal: AbortSignal,
  o: StreamEndOptions,
): Promise<boolean> {
  const started = Date.now();
  const cancel = () => call.cancel();
  signal.addEventListener("abort", cancel, { once: true });
  call.on("error", (err: grpc.ServiceError) => {
    if (!signal.aborted && !o.quiet.includes(err.code)) {
      o.log.warn({ code: err.code, err: err.details }, o.message);
    }
  });
  return new Promise<boolean>((resolve) => {
    call.on("status", (status: grpc.StatusObject) => {
      signal.removeEventListener("abort", cancel);
      resolve(o.received() || status.code === grpc.status.OK || Date.now() - started > HEALTHY_STREAM_MS);
    });
  });
}

/** Call options for a stream to kas: queued until the channel's stream is up rather than failing at once. */
export function waitForReady(): grpc.Metadata {
  return new grpc.Metadata({ waitForReady: true });
}
