import type { Duplex } from "node:stream";
import {
  acceptFrame,
  decodeHeader,
  encodeRejectFrame,
  Kind,
  kindName,
  RejectCode,
  type StreamHeader,
} from "./codec.ts";
import { HeaderError, StreamRejectedError } from "./errors.ts";
import { DEFAULT_MAX_HEADER_BYTES } from "./frame.ts";
import { readFrame } from "./read-frame.ts";

export const DEFAULT_HEADER_TIMEOUT_MS = 10_000;
export const DEFAULT_REJECT_LINGER_MS = 5_000;

/**
 * Takes over an accepted stream, positioned at the start of the opener's payload. `ctx` says
 * who is on the other end (which tunnel the stream came over). From here on the handler owns
 * the stream, its errors included. A handler that throws, or whose returned promise rejects,
 * has its stream destroyed and its error reported to `onHandlerError`.
 */
export type StreamHandler<Ctx> = (stream: Duplex, header: StreamHeader, ctx: Ctx) => void | Promise<void>;

/**
 * Decides, before the opener is told "accepted", whether this stream may proceed. Throw
 * StreamRejectedError (e.g. NOT_FOUND for an unknown service, PERMISSION_DENIED) to refuse
 * with that code and reason; any other error refuses with INTERNAL and a generic reason.
 */
export type AdmitStream<Ctx> = (header: StreamHeader, ctx: Ctx) => void | Promise<void>;

export interface RegisterOptions<Ctx> {
  admit?: AdmitStream<Ctx>;
}

export interface StreamDispatcherOptions<Ctx> {
  /** Largest header accepted. Default 16 KiB. */
  maxHeaderBytes?: number;
  /** A header not complete by then is refused with DEADLINE_EXCEEDED. Default 10 s. */
  headerTimeoutMs?: number;
  /**
   * After a refusal the stream stays half-open this long so the opener can read the reason
   * (a reset right behind the reply could overtake it in the opener's buffers), then is
   * destroyed. The opener normally resets it sooner. Default 5 s.
   */
  rejectLingerMs?: number;
  /** Called for each refused stream, for logs and metrics. */
  onReject?: (error: StreamRejectedError, ctx: Ctx) => void;
  /**
   * Called when a handler fails (throws, or its promise rejects) after the stream was accepted;
   * the stream has been destroyed. Without it such failures are lost: give daemons a log here.
   */
  onHandlerError?: (error: unknown, header: StreamHeader, ctx: Ctx) => void;
}

export type DispatchResult =
  /** `handlerError`: the handler threw synchronously; the stream was destroyed (also given to `onHandlerError`). */
  | { accepted: true; header: StreamHeader; handlerError?: unknown }
  /** `error` is what the opener was told, or a HeaderError("CLOSED") when nobody was left to tell. */
  | { accepted: false; error: StreamRejectedError | HeaderError };

interface Registration<Ctx> {
  handler: StreamHandler<Ctx>;
  admit: AdmitStream<Ctx> | undefined;
}

/**
 * Reads the header that opens every inbound stream and hands the stream to the handler for
 * its kind. A stream that cannot be dispatched is refused with a reason the opener can read
 * and then closed; the session and its other streams are unaffected. Role-agnostic: either
 * end of a tunnel may run one.
 */
export class StreamDispatcher<Ctx = unknown> {
  readonly #handlers = new Map<Kind, Registration<Ctx>>();
  readonly #maxHeaderBytes: number;
  readonly #headerTimeoutMs: number;
  readonly #rejectLingerMs: number;
  readonly #onReject: ((error: StreamRejectedError, ctx: Ctx) => void) | undefined;
  readonly #onHandlerError: StreamDispatcherOptions<Ctx>["onHandlerError"];

  constructor(options: StreamDispatcherOptions<Ctx> = {}) {
    this.#maxHeaderBytes = options.maxHeaderBytes ?? DEFAULT_MAX_HEADER_BYTES;
    this.#headerTimeoutMs = options.headerTimeoutMs ?? DEFAULT_HEADER_TIMEOUT_MS;
    this.#rejectLingerMs = options.rejectLingerMs ?? DEFAULT_REJECT_LINGER_MS;
    this.#onReject = options.onReject;
    this.#onHandlerError = options.onHandlerError;
  }

  register(kind: Kind, handler: StreamHandler<Ctx>, options: RegisterOptions<Ctx> = {}): this {
    if (kind === Kind.KIND_UNSPECIFIED || kind === Kind.UNRECOGNIZED) {
      throw new TypeError(`cannot register a handler for ${kindName(kind)}`);
    }
    if (this.#handlers.has(kind)) throw new Error(`a handler for ${kindName(kind)} is already registered`);
    this.#handlers.set(kind, { handler, admit: options.admit });
    return this;
  }

  /** Never rejects; resolves once the stream was handed to a handler or refused. */
  async handle(stream: Duplex, ctx: Ctx): Promise<DispatchResult> {
    // Until a handler owns the stream, its errors (a peer reset) are ours to absorb.
    const absorb = () => {};
    stream.on("error", absorb);
    let body: Buffer;
    try {
      body = await readFrame(stream, { maxBytes: this.#maxHeaderBytes, timeoutMs: this.#headerTimeoutMs });
    } catch (err) {
      const error = err as HeaderError;
      if (error.code === "CLOSED") {
        stream.destroy();
        return { accepted: false, error };
      }
      const code =
        error.code === "TIMEOUT"
          ? RejectCode.REJECT_CODE_DEADLINE_EXCEEDED
          : RejectCode.REJECT_CODE_BAD_HEADER;
      return this.#reject(stream, ctx, new StreamRejectedError(code, `stream header: ${error.message}`));
    }

    const header = decodeHeader(body);
    if (header instanceof HeaderError) {
      return this.#reject(
        stream,
        ctx,
        new StreamRejectedError(RejectCode.REJECT_CODE_BAD_HEADER, header.message),
      );
    }
    const registration = this.#handlers.get(header.kind);
    if (!registration) {
      const reason = `no handler for stream kind ${kindName(header.kind)}`;
      return this.#reject(stream, ctx, new StreamRejectedError(RejectCode.REJECT_CODE_UNKNOWN_KIND, reason));
    }
    if (registration.admit) {
      try {
        await registration.admit(header, ctx);
      } catch (err) {
        const refusal =
          err instanceof StreamRejectedError
            ? err
            : new StreamRejectedError(
                RejectCode.REJECT_CODE_INTERNAL,
                "the accepting side failed to admit the stream",
              );
        return this.#reject(stream, ctx, refusal);
      }
      if (stream.destroyed) {
        return {
          accepted: false,
          error: new HeaderError("CLOSED", "stream closed while it was being admitted"),
        };
      }
    }

    stream.write(acceptFrame());
    stream.off("error", absorb);
    const failed = (handlerError: unknown) => {
      stream.destroy();
      this.#onHandlerError?.(handlerError, header, ctx);
    };
    try {
      const running = registration.handler(stream, header, ctx);
      if (running instanceof Promise) running.catch(failed);
    } catch (handlerError) {
      failed(handlerError);
      return { accepted: true, header, handlerError };
    }
    return { accepted: true, header };
  }

  #reject(stream: Duplex, ctx: Ctx, error: StreamRejectedError): DispatchResult {
    this.#onReject?.(error, ctx);
    // Reply, half-close, and drop whatever the opener still sends. Once both sides have ended
    // the stream closes by itself (autoDestroy), without a reset; an opener that keeps its side
    // open is reset when the linger runs out. Destroying any sooner could lose the reply: a
    // reset may overtake queued data (yamux sends RST ahead of data frames). The absorbing
    // error listener stays on.
    const linger = setTimeout(() => stream.destroy(), this.#rejectLingerMs);
    linger.unref();
    stream.once("close", () => clearTimeout(linger));
    stream.resume();
    stream.end(encodeRejectFrame(error.code, error.reason));
    return { accepted: false, error };
  }
}
