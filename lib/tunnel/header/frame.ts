import { HeaderError } from "./errors.ts";

/**
 * Frames on a stream before its payload: a 4-byte big-endian body length, then the body.
 * A fixed-width prefix lets the reader refuse an oversized frame as soon as 4 bytes are in,
 * and a peer speaking something else entirely (an HTTP/2 preface, "GET /") announces an
 * absurd length and is refused at once instead of being waited for.
 */
export const LENGTH_PREFIX_BYTES = 4;
export const DEFAULT_MAX_HEADER_BYTES = 16 * 1024;

export function encodeFrame(body: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(LENGTH_PREFIX_BYTES + body.length);
  frame.writeUInt32BE(body.length, 0);
  frame.set(body, LENGTH_PREFIX_BYTES);
  return frame;
}

export type DecodeResult =
  | { state: "partial" }
  /** `rest` holds the bytes that followed the frame in the same chunk: payload to give back. */
  | { state: "complete"; body: Buffer; rest: Buffer }
  | { state: "error"; error: HeaderError };

const PARTIAL: DecodeResult = { state: "partial" };

/** Incremental decoder for exactly one frame; any chunking of the input gives the same result. */
export class HeaderFrameDecoder {
  readonly maxBodyBytes: number;
  #chunks: Buffer[] = [];
  #buffered = 0;
  #bodyLength = -1;
  #settled = false;

  constructor(maxBodyBytes = DEFAULT_MAX_HEADER_BYTES) {
    this.maxBodyBytes = maxBodyBytes;
  }

  /** Bytes held so far; never more than the prefix plus `maxBodyBytes`. */
  get bufferedBytes(): number {
    return this.#buffered;
  }

  /** Bytes that would complete the current stage (prefix, then body); 0 once settled. */
  get bytesWanted(): number {
    if (this.#settled) return 0;
    const stage = this.#bodyLength < 0 ? LENGTH_PREFIX_BYTES : LENGTH_PREFIX_BYTES + this.#bodyLength;
    return stage - this.#buffered;
  }

  push(chunk: Uint8Array): DecodeResult {
    if (this.#settled) throw new Error("HeaderFrameDecoder: push after the frame completed or failed");
    if (chunk.length === 0) return PARTIAL;
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length);
    this.#chunks.push(buf);
    this.#buffered += buf.length;

    if (this.#bodyLength < 0) {
      if (this.#buffered < LENGTH_PREFIX_BYTES) return PARTIAL;
      const length = this.#peekLength();
      if (length > this.maxBodyBytes) {
        return this.#fail(
          new HeaderError(
            "TOO_LARGE",
            `frame of ${length} bytes exceeds the ${this.maxBodyBytes}-byte limit`,
          ),
        );
      }
      this.#bodyLength = length;
    }

    const needed = LENGTH_PREFIX_BYTES + this.#bodyLength;
    if (this.#buffered < needed) return PARTIAL;

    // The frame was incomplete before this chunk, so whatever lies past it is in this chunk.
    const overflow = this.#buffered - needed;
    this.#chunks[this.#chunks.length - 1] = buf.subarray(0, buf.length - overflow);
    const frame = Buffer.concat(this.#chunks, needed);
    this.#release();
    return {
      state: "complete",
      body: frame.subarray(LENGTH_PREFIX_BYTES),
      rest: buf.subarray(buf.length - overflow),
    };
  }

  #peekLength(): number {
    const first = this.#chunks[0]!;
    const prefix =
      first.length >= LENGTH_PREFIX_BYTES
        ? first
        : Buffer.concat(this.#chunks).subarray(0, LENGTH_PREFIX_BYTES);
    return prefix.readUInt32BE(0);
  }

  #fail(error: HeaderError): DecodeResult {
    this.#release();
    return { state: "error", error };
  }

  #release(): void {
    this.#settled = true;
    this.#chunks = [];
    this.#buffered = 0;
  }
}
