import type { EventEmitter } from "node:events";
import type { Readable } from "node:stream";

/**
 * Resolves with the arguments of `event`; rejects on 'error', on any of `failOn` (with `failure`),
 * or with `signal.reason` when the signal aborts. Listeners are removed either way.
 */
export function waitForEvent<T extends unknown[]>(
  emitter: EventEmitter,
  event: string,
  signal: AbortSignal,
  failOn: Record<string, () => Error> = {},
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const failures = Object.entries(failOn).map(([name, make]) => [name, () => done(make())] as const);
    const onEvent = (...args: unknown[]) => {
      cleanup();
      resolve(args as T);
    };
    const done = (err: unknown) => {
      cleanup();
      reject(err);
    };
    const onAbort = () => done(signal.reason);
    const cleanup = () => {
      emitter.removeListener(event, onEvent);
      emitter.removeListener("error", done);
      for (const [name, fn] of failures) emitter.removeListener(name, fn);
      signal.removeEventListener("abort", onAbort);
    };
    emitter.once(event, onEvent);
    emitter.once("error", done);
    for (const [name, fn] of failures) emitter.once(name, fn);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** Reads at most `max` bytes of a response body as UTF-8, never failing; stops at end, error or close. */
export function readBody(body: Readable, max: number): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = () => {
      body.removeListener("data", onData);
      body.destroy();
      resolve(Buffer.concat(chunks).toString("utf8"));
    };
    const onData = (chunk: Buffer) => {
      const room = max - size;
      if (room > 0) {
        chunks.push(chunk.subarray(0, room));
        size += Math.min(room, chunk.length);
      }
      if (size >= max) finish();
    };
    body.on("data", onData);
    body.once("end", finish);
    body.once("error", finish);
    body.once("close", finish);
  });
}
