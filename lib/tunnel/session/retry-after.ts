import { RETRY_SCHEDULED_HEADER } from "../transport/constants.ts";
import { HandshakeError } from "../transport/errors.ts";

/** A server may ask for a long pause, but not park a client for good (nor by mistake). */
export const MAX_RETRY_AFTER_MS = 10 * 60_000;

/**
 * How long the server asked the client to wait before it dials again (the `Retry-After` of a
 * refused handshake: a 429 when the client is over a limit, a 503 when the server is busy), capped
 * at {@link MAX_RETRY_AFTER_MS}; undefined when it asked nothing (or nothing readable).
 */
export function retryAfterMs(err: unknown, now: number = Date.now()): number | undefined {
  if (!(err instanceof HandshakeError)) return undefined;
  const value = err.headers["retry-after"];
  if (typeof value !== "string") return undefined;
  const text = value.trim();
  let ms: number;
  if (/^\d+$/.test(text))
    ms = Number(text) * 1000; // delay-seconds
  else {
    // Or an HTTP-date, which starts with the day's name: Date.parse alone takes "-5" for a year.
    const date = /^[A-Za-z]{3,9},? /.test(text) ? Date.parse(text) : Number.NaN;
    if (Number.isNaN(date)) return undefined;
    ms = Math.max(0, date - now);
  }
  return Math.min(ms, MAX_RETRY_AFTER_MS);
}

/**
 * Whether a refused handshake's `Retry-After` is a place in the server's schedule
 * ({@link RETRY_SCHEDULED_HEADER}, a paced acceptor's 503) rather than a floor under the backoff.
 */
export function retryScheduled(err: unknown): boolean {
  return err instanceof HandshakeError && err.headers[RETRY_SCHEDULED_HEADER] === "1";
}
