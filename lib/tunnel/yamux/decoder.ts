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
    if (this.#buffered === 0) {
      chunk = this.#frames(chunk);
      if (chunk.length === 0) return;
    }
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

  /**
   * With nothing buffered, the frames that lie whole in `chunk` are read in place (one WebSocket
   * message is usually one or a few whole frames), without queueing the chunk and slicing it
   * header by header. Returns the rest, the start of a frame still incomplete.
   */
  #frames(chunk: Buffer): Buffer {
    let off = 0;
    while (!this.#stopped) {
      let header = this.#header;
      if (header === null) {
        if (chunk.length - off < HEADER_SIZE) break;
        header = readHeader(chunk, off);
        validate(header, this.#maxPayload);
        off += HEADER_SIZE;
      }
      const need = header.type === FrameType.Data ? header.length : 0;
      if (chunk.length - off < need) {
        this.#header = header;
        break;
      }
      this.#header = null;
      const payload = need > 0 ? chunk.subarray(off, off + need) : undefined;
      off += need;
      this.#onFrame(header, payload);
    }
    if (this.#stopped || off === chunk.length) return EMPTY;
    return off === 0 ? chunk : chunk.subarray(off);
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

const EMPTY = Buffer.alloc(0);

function validate(h: FrameHeader, maxPayload: number): void {
  if (h.version !== PROTOCOL_VERSION) throw new ProtocolError(`unsupported version ${h.version}`);
  if (h.type > FrameType.GoAway) throw new ProtocolError(`unknown frame type ${h.type}`);
  if (h.type === FrameType.Data && h.length > maxPayload) {
    throw new ProtocolError(`data frame of ${h.length} bytes exceeds the largest window ${maxPayload}`);
  }
}
