import { Duplex } from "node:stream";

// An independent reading of the yamux wire format (hashicorp/yamux spec.md), used as the oracle in
// byte-level tests: it shares no code with lib/tunnel/yamux on purpose. It only parses and builds
// single frames; it is not a yamux implementation.

export const T = { Data: 0, WindowUpdate: 1, Ping: 2, GoAway: 3 } as const;
export const F = { SYN: 1, ACK: 2, FIN: 4, RST: 8 } as const;

export interface RawFrame {
  version: number;
  type: number;
  flags: number;
  streamId: number;
  length: number;
  /** Data frames only; empty otherwise. */
  payload: Buffer;
  /** The frame exactly as it was on the wire. */
  bytes: Buffer;
}

export function rawFrame(
  type: number,
  flags: number,
  streamId: number,
  length: number,
  payload?: Buffer,
): Buffer {
  const h = Buffer.alloc(12);
  h[0] = 0;
  h[1] = type;
  h.writeUInt16BE(flags, 2);
  h.writeUInt32BE(streamId, 4);
  h.writeUInt32BE(length, 8);
  return payload ? Buffer.concat([h, payload]) : h;
}

export function dataFrame(flags: number, streamId: number, payload: Buffer): Buffer {
  return rawFrame(T.Data, flags, streamId, payload.length, payload);
}

/** Splits complete frames off the front of `buf`; `rest` is an incomplete tail. */
export function parseFrames(buf: Buffer): { frames: RawFrame[]; rest: Buffer } {
  const frames: RawFrame[] = [];
  let off = 0;
  while (buf.length - off >= 12) {
    const type = buf[off + 1]!;
    const length = buf.readUInt32BE(off + 8);
    const size = 12 + (type === T.Data ? length : 0);
    if (buf.length - off < size) break;
    const bytes = buf.subarray(off, off + size);
    frames.push({
      version: bytes[0]!,
      type,
      flags: bytes.readUInt16BE(2),
      streamId: bytes.readUInt32BE(4),
      length,
      payload: bytes.subarray(12),
      bytes,
    });
    off += size;
  }
  return { frames, rest: buf.subarray(off) };
}

/** Header fields only, for readable assertion diffs. */
export function fieldsOf(f: RawFrame): {
  version: number;
  type: number;
  flags: number;
  streamId: number;
  length: number;
} {
  return { version: f.version, type: f.type, flags: f.flags, streamId: f.streamId, length: f.length };
}

export interface RawPeerBehaviour {
  /** Answer Ping SYN with Ping ACK echoing the opaque value (what every yamux does). */
  answerPings?: boolean;
  /** Answer a stream SYN with WindowUpdate ACK, length 0 (what hashicorp/yamux's Accept sends). */
  ackStreams?: boolean;
  /** Answer a FIN on a stream the other side opened with WindowUpdate FIN, length 0, so it closes on both sides. */
  finBack?: boolean;
}

/**
 * A plain TCP socket standing where a yamux peer would be: it records every byte it receives,
 * splits them into frames, and can answer a few frames by rule so the other side's scripted
 * scenario can proceed.
 */
export class RawPeer {
  readonly frames: RawFrame[] = [];
  readonly #socket: Duplex;
  readonly #behaviour: RawPeerBehaviour;
  #received: Buffer[] = [];
  #opened = new Set<number>();
  #tail = Buffer.alloc(0);
  #ended = false;
  #listeners = new Set<() => void>();

  constructor(socket: Duplex, behaviour: RawPeerBehaviour = {}) {
    this.#socket = socket;
    this.#behaviour = behaviour;
    socket.on("data", (chunk: Buffer) => this.#onData(chunk));
    socket.on("error", () => {});
    const ended = () => {
      this.#ended = true;
      this.#notify();
    };
    socket.on("end", ended);
    socket.on("close", ended);
  }

  /** Every byte received so far, in order. */
  get bytes(): Buffer {
    return Buffer.concat(this.#received);
  }

  write(buf: Buffer): void {
    this.#socket.write(buf);
  }

  /** Writes `buf` one byte per chunk, so the reader sees every frame split at every offset. */
  writeBytewise(buf: Buffer): void {
    for (let i = 0; i < buf.length; i++) this.#socket.write(buf.subarray(i, i + 1));
  }

  close(): void {
    this.#socket.destroy();
  }

  /** Our side ended (the peer's session closed the connection). */
  get ended(): boolean {
    return this.#ended;
  }

  /** The first received frame matching `match`, seen already or still to come. */
  waitFor(match: (f: RawFrame) => boolean, what: string, timeoutMs = 10_000): Promise<RawFrame> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const f = this.frames.find(match);
        if (f) return finish(() => resolve(f));
        if (this.#ended)
          finish(() => reject(new Error(`connection closed before ${what}; got ${this.#summary()}`)));
      };
      const timer = setTimeout(
        () => finish(() => reject(new Error(`no ${what} within ${timeoutMs} ms; got ${this.#summary()}`))),
        timeoutMs,
      );
      const finish = (settle: () => void) => {
        clearTimeout(timer);
        this.#listeners.delete(check);
        settle();
      };
      this.#listeners.add(check);
      check();
    });
  }

  #summary(): string {
    return JSON.stringify(this.frames.map(fieldsOf));
  }

  #onData(chunk: Buffer): void {
    this.#received.push(chunk);
    const { frames, rest } = parseFrames(Buffer.concat([this.#tail, chunk]));
    this.#tail = Buffer.from(rest);
    for (const f of frames) {
      this.frames.push(f);
      this.#answer(f);
    }
    this.#notify();
  }

  #answer(f: RawFrame): void {
    const b = this.#behaviour;
    if (f.type === T.Ping && f.flags & F.SYN && b.answerPings) {
      this.write(rawFrame(T.Ping, F.ACK, 0, f.length));
    }
    if (f.type !== T.Data && f.type !== T.WindowUpdate) return;
    if (f.flags & F.SYN) {
      this.#opened.add(f.streamId);
      if (b.ackStreams) this.write(rawFrame(T.WindowUpdate, F.ACK, f.streamId, 0));
    }
    if (f.flags & F.FIN && b.finBack && this.#opened.has(f.streamId)) {
      this.write(rawFrame(T.WindowUpdate, F.FIN, f.streamId, 0));
    }
  }

  #notify(): void {
    for (const l of [...this.#listeners]) l();
  }
}

/**
 * Two connected in-memory Duplex ends. Unlike TCP, every write arrives as its own chunk, so a
 * sender controls exactly where the receiver's reads split the byte stream.
 */
export function memoryPair(): [Duplex, Duplex] {
  const a = new MemoryEnd();
  const b = new MemoryEnd();
  a.other = b;
  b.other = a;
  return [a, b];
}

class MemoryEnd extends Duplex {
  other!: MemoryEnd;
  override _read(): void {}
  override _write(chunk: Buffer, _enc: BufferEncoding, callback: (err?: Error | null) => void): void {
    this.other.push(Buffer.from(chunk));
    callback();
  }
  override _final(callback: (err?: Error | null) => void): void {
    this.other.push(null);
    callback();
  }
  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    if (!this.other.destroyed) this.other.push(null);
    callback(err);
  }
}
