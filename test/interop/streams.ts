import { createHash, randomBytes } from "node:crypto";
import type { Readable, Writable } from "node:stream";

export { readAll } from "../support/read-all.ts";

export { randomBytes };

export function sha256(data: Buffer | string): string {
  return createHash("sha256").update(data).digest("hex");
}

/** Rejects with a message naming `what` unless `p` settles within `ms`. */
export function deadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** Reads to the end; resolves with the SHA-256 and length, rejects on a stream error. */
export function digestOf(readable: Readable): Promise<{ hex: string; bytes: number }> {
  return new Promise((resolve, reject) => {
    const h = createHash("sha256");
    let bytes = 0;
    readable.on("data", (c: Buffer) => {
      h.update(c);
      bytes += c.length;
    });
    readable.once("end", () => resolve({ hex: h.digest("hex"), bytes }));
    readable.once("error", reject);
  });
}

/** Writes `data` in pieces of random size (honouring backpressure), then ends the stream. */
export async function writeInPieces(w: Writable, data: Buffer, maxPiece = 96 * 1024): Promise<void> {
  let off = 0;
  while (off < data.length) {
    const n = Math.min(data.length - off, 1 + Math.floor(Math.random() * maxPiece));
    const piece = data.subarray(off, off + n);
    off += n;
    if (!w.write(piece)) {
      await new Promise<void>((resolve, reject) => {
        const onDrain = () => {
          w.off("error", onError);
          resolve();
        };
        const onError = (err: Error) => {
          w.off("drain", onDrain);
          reject(err);
        };
        w.once("drain", onDrain);
        w.once("error", onError);
      });
    }
  }
  await new Promise<void>((resolve, reject) => {
    w.once("error", reject);
    w.end(resolve);
  });
}

/** Resolves with the error a stream fails with, or rejects if it closes cleanly or not at all. */
export function streamError(s: Readable | Writable, ms = 10_000): Promise<NodeJS.ErrnoException> {
  return deadline(
    new Promise((resolve, reject) => {
      s.once("error", resolve);
      s.once("close", () => setImmediate(() => reject(new Error("stream closed without an error"))));
    }),
    ms,
    "waiting for the stream to fail",
  );
}

/**
 * Rejects as soon as the session closes with an error (a protocol violation, a GoAway with an error
 * code); race it against a test's waits so such a failure is reported at once and by its cause.
 */
export function sessionFailure(s: {
  once(event: "close", fn: (err?: Error) => void): unknown;
}): Promise<never> {
  const failed = new Promise<never>((_, reject) => {
    s.once("close", (err?: Error) => {
      if (err) reject(new Error(`TS session closed with an error: ${err.message}`, { cause: err }));
    });
  });
  failed.catch(() => {}); // reported through the race, if anyone is waiting
  return failed;
}

/** Reads exactly `n` bytes, leaving the rest in the stream for whoever reads next. */
export function readExactly(r: Readable, n: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const done = (settle: () => void) => {
      r.off("readable", tryRead);
      r.off("end", onEnd);
      r.off("error", reject);
      settle();
    };
    const tryRead = () => {
      const b = r.read(n) as Buffer | null;
      if (b) done(() => resolve(b));
    };
    const onEnd = () => done(() => reject(new Error(`stream ended before ${n} bytes`)));
    r.on("readable", tryRead);
    r.once("end", onEnd);
    r.once("error", reject);
  });
}
