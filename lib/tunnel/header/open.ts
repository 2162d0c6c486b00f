import type { Duplex } from "node:stream";
import { decodeReply, encodeHeaderFrame, type StreamHeaderInit } from "./codec.ts";
import { HeaderError, StreamRejectedError } from "./errors.ts";
import { DEFAULT_MAX_HEADER_BYTES } from "./frame.ts";
import { readFrame } from "./read-frame.ts";

export const DEFAULT_OPEN_TIMEOUT_MS = 10_000;

/** Opens a raw stream (e.g. `() => session.open()`); should give up when `signal` aborts. */
export type OpenStream = (signal: AbortSignal) => Promise<Duplex>;

export interface OpenWithHeaderOptions {
  signal?: AbortSignal;
  /** Covers opening the stream and the peer's reply. Default 10 s. */
  timeoutMs?: number;
  /** Largest reply accepted from the peer. Default 16 KiB. */
  maxReplyBytes?: number;
}

/**
 * Opens a stream, writes `header`, and waits for the accepting side's verdict.
 * Resolves with the stream positioned at the start of the peer's payload; rejects with
 * StreamRejectedError (the peer refused: code and reason), HeaderError (no readable reply:
 * TIMEOUT, CLOSED, MALFORMED, TOO_LARGE), TypeError (a header no peer could accept) or the
 * signal's reason. On any failure the stream is destroyed.
 *
 * The opener waits for the verdict before handing the stream out, at the cost of one round
 * trip per stream (the yamux SYN travels with the header, so it is the only one). In return a
 * refused stream never carries payload to the wrong handler, the refusal reaches the caller as
 * an error of `openWithHeader` itself rather than a reset in the middle of a protocol, and the
 * payload read by the caller never starts with a reply frame it must skip. The round trip is
 * paid per stream, not per request: gRPC channels and HTTP agents keep their connection (one
 * stream) open across many requests.
 */
export async function openWithHeader(
  open: OpenStream,
  header: StreamHeaderInit,
  options: OpenWithHeaderOptions = {},
): Promise<Duplex> {
  const frame = encodeHeaderFrame(header);
  const { signal, timeoutMs = DEFAULT_OPEN_TIMEOUT_MS, maxReplyBytes = DEFAULT_MAX_HEADER_BYTES } = options;
  signal?.throwIfAborted();

  const deadline = new AbortController();
  const timer = setTimeout(
    () => deadline.abort(new HeaderError("TIMEOUT", `no reply to the stream header within ${timeoutMs} ms`)),
    timeoutMs,
  );
  const onAbort = () => deadline.abort(signal!.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    const stream = await untilAborted(open(deadline.signal), deadline.signal);
    try {
      const reply = readFrame(stream, { maxBytes: maxReplyBytes, signal: deadline.signal });
      stream.write(frame);
      const verdict = decodeReply(await reply);
      if (verdict instanceof HeaderError) throw verdict;
      if (!verdict.accepted) throw new StreamRejectedError(verdict.reject.code, verdict.reject.message);
      return stream;
    } catch (err) {
      stream.destroy();
      throw err;
    }
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

/** Races `opening` against `signal`; a stream that opens too late is destroyed, not leaked. */
function untilAborted(opening: Promise<Duplex>, signal: AbortSignal): Promise<Duplex> {
  return new Promise<Duplex>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    if (signal.aborted) onAbort();
    opening.then(
      (stream) => {
        signal.removeEventListener("abort", onAbort);
        if (signal.aborted) stream.destroy();
        else resolve(stream);
      },
      (err) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}
