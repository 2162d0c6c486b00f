import { ProtocolError } from "./errors.ts";
import { type FrameHeader, FrameType, HEADER_SIZE, PROTOCOL_VERSION, readHeader } from "./frame.ts";

export type FrameHandler = (header: FrameHeader, payload: Buffer | undefined) => void;

/**
 * Turns a byte stream cut at arbitrary points into frames. Payloads are handed out as views of the
 * incoming chunk when they lie within one; only a payload split across chunks is copied.
 * A Data frame longer than `maxPayload` is refused before any of it is buffered.
 */
export class FrameDecoder {
  readonly #maxPayload: number;
  readonly #onFrame: FrameHandler;
  #chunks: Buffer[] = [];
  #buffered = 0;
  #header: FrameHeader | null = null;
  #stopped = false;

  constructor(maxPayload: number, onFrame: FrameHandler) {
    this.#maxPayload = maxPayload;
    this.#onFrame = onFrame;
  }

  /** Stops delivering frames, e.g. once the session has closed. */
  stop(): void {
    this.#stopped = true;
    this.#chunks = [];
    this.#buffered = 0;
  }

  /** Throws ProtocolError on malformed input; the caller then tears the session down. */
  push(chunk: Buffer): void {
    if (this.#stopped || chunk.length === 0) return;
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    while (!this.#stopped) {
      let header = this.#header;
      if (header === null) {
        if (this.#buffered < HEADER_SIZE) return;
        header = readHeader(this.#take(HEADER_SIZE));
        validate(header, this.#maxPayload);
        this.#header = header;
      }
      const need = header.type === FrameType.Data ? header.length : 0;
      if (this.#buffered < need) return;
      this.#header = null;
      this.#onFrame(header, need > 0 ? this.#take(need) : undefined);
    }
  }

  #take(n: number): Buffer {
    this.#buffered -= n;
    const first = this.#chunks[0]!;
    if (first.length > n) {
      this.#chunks[0] = first.subarray(n);
      return first.subarray(0, n);
    }
    if (first.length === n) {
      this.#chunks.shift();
      return first;
    }
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    while (filled < n) {
      const c = this.#chunks[0]!;
      const k = Math.min(c.length, n - filled);
      c.copy(out, filled, 0, k);
      filled += k;
      if (k === c.length) this.#chunks.shift();
      else this.#chunks[0] = c.subarray(k);
    }
    return out;
  }
}

function validate(h: FrameHeader, maxPayload: number): void {
  if (h.version !== PROTOCOL_VERSION) throw new ProtocolError(`unsupported version ${h.version}`);
  if (h.type > FrameType.GoAway) throw new ProtocolError(`unknown frame type ${h.type}`);
  if (h.type === FrameType.Data && h.length > maxPayload) {
    throw new ProtocolError(`data frame of ${h.length} bytes exceeds the largest window ${maxPayload}`);
  }
}
