import type { Readable } from "node:stream";
import { HeaderError } from "./errors.ts";
import { HeaderFrameDecoder } from "./frame.ts";

export interface ReadFrameOptions {
  /** Largest body accepted; a longer announced length fails before its bytes are read. */
  maxBytes: number;
  /** Fails with HeaderError("TIMEOUT") when no whole frame arrived in time. */
  timeoutMs?: number;
  /** Aborting fails the read with `signal.reason`. */
  signal?: AbortSignal;
}

/**
 * Reads one length-prefixed frame from `stream` and returns its body, leaving every byte after
 * it in the stream for whoever reads next.
 *
 * Reads are sized to what the frame still needs, so payload bytes are never taken (should a
 * read return more, the excess is unshifted back). Sizing matters beyond that: a read that
 * drains an ended stream schedules 'end' at once, before the next owner can listen for it,
 * and a stream that carried nothing after the frame would then never end for them.
 *
 * Fails with HeaderError (TOO_LARGE, MALFORMED, CLOSED, TIMEOUT) or the signal's reason;
 * never destroys the stream — that is the caller's decision.
 */
export function readFrame(stream: Readable, options: ReadFrameOptions): Promise<Buffer> {
  const { maxBytes, timeoutMs, signal } = options;
  return new Promise<Buffer>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    if (stream.destroyed || stream.readableEnded) {
      return reject(new HeaderError("CLOSED", "stream closed before a frame arrived"));
    }
    const decoder = new HeaderFrameDecoder(maxBytes);

    const settle = (error: unknown, body?: Buffer) => {
      stream.off("readable", onReadable);
      stream.off("end", onEnd);
      stream.off("close", onClose);
      stream.off("error", onError);
      signal?.removeEventListener("abort", onAbort);
      clearTimeout(timer);
      if (body !== undefined) resolve(body);
      else reject(error);
    };
    const onReadable = () => {
      for (;;) {
        const n = Math.min(decoder.bytesWanted, stream.readableLength);
        // Nothing buffered: a bare read() emits 'end' at EOF (consuming nothing) or asks for more.
        if (n === 0) return void stream.read();
        const chunk = stream.read(n) as Buffer | null;
        if (chunk === null) return;
        const result = decoder.push(chunk);
        if (result.state === "partial") continue;
        if (result.state === "error") return settle(result.error);
        if (result.rest.length > 0) stream.unshift(result.rest);
        return settle(undefined, result.body);
      }
    };
    const truncated = (what: string) =>
      new HeaderError("CLOSED", `stream ${what} after ${decoder.bufferedBytes} bytes of a frame`);
    const onEnd = () => settle(truncated("ended"));
    const onClose = () => settle(truncated("closed"));
    const onError = (err: Error) =>
      settle(
        new HeaderError("CLOSED", `stream failed while reading a frame: ${err.message}`, { cause: err }),
      );
    const onAbort = () => settle(signal!.reason);
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(
            () => settle(new HeaderError("TIMEOUT", `no whole frame within ${timeoutMs} ms`)),
            timeoutMs,
          );

    stream.on("readable", onReadable);
    stream.on("end", onEnd);
    stream.on("close", onClose);
    stream.on("error", onError);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
