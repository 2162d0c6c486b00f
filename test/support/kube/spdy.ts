// The server side of SPDY/3.1 (draft-mbelshe-httpbis-spdy-00 as amended for 3.1), only as much as
// `kubectl port-forward` needs: client-go speaks it through moby/spdystream, which opens streams
// (SYN_STREAM), waits for each SYN_REPLY, sends DATA, half-closes with an empty DATA+FIN, cancels
// with RST_STREAM, may PING (answered) and ends with GOAWAY. spdystream does no flow control (it
// neither sends nor honours WINDOW_UPDATE and never sends SETTINGS), so this server sends neither;
// backpressure is the transport's, as with spdystream: a stream whose reader stalls stalls the
// connection. Anything malformed closes the connection.
import { Duplex } from "node:stream";
import { constants, createDeflate, createInflate, type Deflate, type Inflate } from "node:zlib";
import { SPDY3_DICTIONARY } from "./spdy-dictionary.ts";

const VERSION = 3;
const TYPE = {
  synStream: 1,
  synReply: 2,
  rstStream: 3,
  settings: 4,
  ping: 6,
  goAway: 7,
  headers: 8,
  windowUpdate: 9,
} as const;
const FLAG_FIN = 0x01;
export const RST_STATUS = { protocolError: 1, refusedStream: 3, cancel: 5 } as const;

/** Larger than any frame client-go writes (io.Copy's 32 KiB buffers), far below SPDY's 16 MiB. */
const MAX_FRAME = 256 * 1024;
/** A decompressed header block larger than this closes the connection (port-forward sends ~60 bytes). */
const MAX_HEADER_BLOCK = 64 * 1024;
/** Open streams per connection; more are refused (REFUSED_STREAM) rather than buffered. */
const MAX_STREAMS = 128;
const EMPTY = Buffer.alloc(0);

class ProtocolError extends Error {}

/** A frame as it came off the wire: control frames keep their payload undecoded. */
type Frame =
  | { control: true; version: number; type: number; flags: number; payload: Buffer }
  | { control: false; streamId: number; flags: number; payload: Buffer };

/** The first frame in `buf` and its size on the wire, or undefined if it has not all arrived. */
function takeFrame(buf: Buffer): { frame: Frame; size: number } | undefined {
  if (buf.length < 8) return undefined;
  const flags = buf[4]!;
  const length = buf.readUIntBE(5, 3);
  if (length > MAX_FRAME) throw new ProtocolError(`frame of ${length} bytes`);
  if (buf.length < 8 + length) return undefined;
  const payload = buf.subarray(8, 8 + length);
  const first = buf.readUInt32BE(0);
  const frame: Frame =
    first & 0x80000000
      ? { control: true, version: (first >>> 16) & 0x7fff, type: first & 0xffff, flags, payload }
      : { control: false, streamId: first, flags, payload };
  return { frame, size: 8 + length };
}

function controlFrame(type: number, flags: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(8);
  header.writeUInt16BE(0x8000 | VERSION, 0);
  header.writeUInt16BE(type, 2);
  header.writeUInt32BE(((flags << 24) | payload.length) >>> 0, 4);
  return Buffer.concat([header, payload]);
}

function dataFrame(streamId: number, fin: boolean, data: Buffer): Buffer {
  const header = Buffer.alloc(8);
  header.writeUInt32BE(streamId, 0);
  header.writeUInt32BE((((fin ? FLAG_FIN : 0) << 24) | data.length) >>> 0, 4);
  return Buffer.concat([header, data]);
}

/** A name/value header block (SPDY/3 §2.6.10): a count, then length-prefixed names and values. */
function parseHeaderBlock(block: Buffer): Map<string, string> {
  const headers = new Map<string, string>();
  let at = 0;
  const take = (): string => {
    if (at + 4 > block.length) throw new ProtocolError("truncated header block");
    const length = block.readUInt32BE(at);
    if (at + 4 + length > block.length) throw new ProtocolError("truncated header block");
    const text = block.toString("latin1", at + 4, at + 4 + length);
    at += 4 + length;
    return text;
  };
  if (block.length < 4) throw new ProtocolError("truncated header block");
  const count = block.readUInt32BE(0);
  at = 4;
  for (let i = 0; i < count; i++) {
    const name = take();
    // Several values of one name are NUL-separated; port-forward sends one of each.
    headers.set(name, take());
  }
  return headers;
}

function headerBlock(headers: ReadonlyMap<string, string>): Buffer {
  const parts: Buffer[] = [Buffer.alloc(4)];
  parts[0]!.writeUInt32BE(headers.size);
  for (const [name, value] of headers) {
    for (const text of [name.toLowerCase(), value]) {
      const length = Buffer.alloc(4);
      length.writeUInt32BE(Buffer.byteLength(text, "latin1"));
      parts.push(length, Buffer.from(text, "latin1"));
    }
  }
  return Buffer.concat(parts);
}

/**
 * One direction's header compression: SPDY/3 runs a single zlib stream (with the SPDY dictionary)
 * through every header block of the connection, each block ending in a sync flush, so blocks must
 * go through in wire order and the context must see every block, wanted or not.
 */
class HeaderZlib {
  readonly #zlib: Inflate | Deflate;
  #output: Buffer[] = [];
  #size = 0;
  #queue: Promise<unknown> = Promise.resolve();
  /** Fails the block in progress: zlib reports bad input by destroying itself, not to the write's callback. */
  #fail: ((err: Error) => void) | undefined;

  constructor(zlib: Inflate | Deflate) {
    this.#zlib = zlib;
    // Collected as it comes: with `flush: Z_SYNC_FLUSH` each write's output is all emitted before
    // the write's callback runs.
    zlib.on("data", (chunk: Buffer) => {
      this.#size += chunk.length;
      if (this.#size <= MAX_HEADER_BLOCK) this.#output.push(chunk);
    });
    zlib.on("error", (err) => this.#fail?.(new ProtocolError(`header block: ${err.message}`)));
    zlib.on("close", () => this.#fail?.(new ProtocolError("header compression closed")));
  }

  static inflater(): HeaderZlib {
    return new HeaderZlib(createInflate({ dictionary: SPDY3_DICTIONARY, flush: constants.Z_SYNC_FLUSH }));
  }

  static deflater(): HeaderZlib {
    return new HeaderZlib(createDeflate({ dictionary: SPDY3_DICTIONARY, flush: constants.Z_SYNC_FLUSH }));
  }

  /** The (de)compressed form of `input`, after every block given before it. */
  run(input: Buffer): Promise<Buffer> {
    const result = this.#queue.then(
      () =>
        new Promise<Buffer>((resolve, reject) => {
          if (this.#zlib.destroyed) return reject(new ProtocolError("header compression closed"));
          this.#fail = reject;
          this.#zlib.write(input, (err) => {
            this.#fail = undefined;
            const output = Buffer.concat(this.#output);
            const size = this.#size;
            this.#output = [];
            this.#size = 0;
            if (err) reject(new ProtocolError(`header block: ${err.message}`));
            else if (size > MAX_HEADER_BLOCK) reject(new ProtocolError(`header block of ${size} bytes`));
            else resolve(output);
          });
        }),
    );
    this.#queue = result.catch(() => {});
    return result;
  }

  close(): void {
    this.#zlib.destroy();
  }
}

/** What a stream needs of its connection. */
interface StreamOwner {
  reply(id: number): void;
  data(id: number, data: Buffer, fin: boolean): Promise<void>;
  reset(id: number, status: number): void;
  forget(id: number): void;
}

/**
 * A stream the client opened, as a Duplex: reading gives its DATA (ending at the client's FIN),
 * writing sends DATA, `end()` sends FIN. Destroying it before both sides finished sends
 * RST_STREAM (CANCEL), as spdystream's Reset does.
 */
export class SpdyStream extends Duplex {
  readonly id: number;
  /** The SYN_STREAM's headers, names lowercase. */
  readonly headers: ReadonlyMap<string, string>;
  readonly #owner: StreamOwner;
  #replied = false;
  /** Reset already (by either side): nothing more may be sent on it, not even RST_STREAM. */
  #reset = false;
  /** Resolves a delivery waiting for the reader to catch up. */
  #wake: (() => void) | undefined;

  constructor(id: number, headers: ReadonlyMap<string, string>, owner: StreamOwner) {
    super({ allowHalfOpen: true });
    this.id = id;
    this.headers = headers;
    this.#owner = owner;
  }

  /** Accepts the stream (SYN_REPLY, no headers): the client writes nothing before it. */
  reply(): void {
    if (this.#replied || this.destroyed) return;
    this.#replied = true;
    this.#owner.reply(this.id);
  }

  /** Refuses the stream (RST_STREAM REFUSED_STREAM). */
  refuse(): void {
    this.#replied = true;
    this.#owner.reset(this.id, RST_STATUS.refusedStream);
    this.#reset = true;
    this.destroy();
  }

  /** @internal The session hands over the client's DATA; resolves once the reader can take more. */
  async deliver(data: Buffer, fin: boolean): Promise<void> {
    if (this.destroyed || this.readableEnded) return;
    const more = data.length === 0 || this.push(data);
    if (fin) this.push(null);
    else if (!more) await new Promise<void>((resolve) => (this.#wake = resolve));
  }

  /** @internal The client reset the stream, or the connection is gone: nothing more to send. */
  abort(): void {
    this.#reset = true;
    this.destroy();
  }

  override _read(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    this.reply();
    this.#owner.data(this.id, chunk, false).then(() => callback());
  }

  override _final(callback: (err?: Error | null) => void): void {
    this.reply();
    this.#owner.data(this.id, EMPTY, true).then(() => callback());
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this._read(); // a delivery waiting on this stream must not hold up the connection
    const finished = this.readableEnded && this.writableFinished;
    if (!finished && !this.#reset) this.#owner.reset(this.id, RST_STATUS.cancel);
    this.#owner.forget(this.id);
    callback(err);
  }
}

/**
 * A SPDY/3.1 server connection over `transport` (a socket after `Upgrade: SPDY/3.1`, or the byte
 * stream of a WebSocket tunnel): `onStream` gets each stream the client opens and must `reply()`
 * or `refuse()` it. The connection ends when the transport does; its streams are destroyed then.
 */
export class SpdySession {
  readonly #transport: Duplex;
  readonly #onStream: (stream: SpdyStream) => void;
  readonly #streams = new Map<number, SpdyStream>();
  readonly #inflater = HeaderZlib.inflater();
  readonly #deflater = HeaderZlib.deflater();
  /** Frames leave one at a time, in order: a SYN_REPLY (compressed asynchronously) before its DATA. */
  #sending: Promise<void> = Promise.resolve();
  #lastStreamId = 0;
  #closed = false;
  readonly #owner: StreamOwner = {
    reply: (id) => void this.#send(() => this.#synReply(id)),
    data: (id, data, fin) => this.#send(() => dataFrame(id, fin, data)),
    reset: (id, status) => void this.#send(() => rstStream(id, status)),
    forget: (id) => this.#streams.delete(id),
  };

  constructor(transport: Duplex, onStream: (stream: SpdyStream) => void) {
    this.#transport = transport;
    this.#onStream = onStream;
    transport.on("error", () => transport.destroy());
    transport.once("close", () => this.close());
    void this.#read();
  }

  /** Ends the connection now: every stream destroyed, the transport too. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const stream of [...this.#streams.values()]) stream.abort();
    this.#transport.destroy();
    this.#inflater.close();
    this.#deflater.close();
  }

  async #read(): Promise<void> {
    let pending: Buffer = EMPTY;
    try {
      // One frame at a time: a DATA frame waits for its stream's reader, which holds back the
      // transport (and the client) when a reader is slow, and keeps `pending` bounded.
      for await (const chunk of this.#transport) {
        pending = pending.length === 0 ? (chunk as Buffer) : Buffer.concat([pending, chunk as Buffer]);
        for (let next = takeFrame(pending); next; next = takeFrame(pending)) {
          pending = pending.subarray(next.size);
          await this.#handle(next.frame);
        }
      }
    } catch {
      // A malformed frame, or the transport failed: either way the connection is over.
    } finally {
      this.close();
    }
  }

  async #handle(frame: Frame): Promise<void> {
    if (!frame.control) {
      const fin = (frame.flags & FLAG_FIN) !== 0;
      // DATA on a stream already reset or finished is dropped, as spdystream drops it.
      await this.#streams.get(frame.streamId)?.deliver(frame.payload, fin);
      return;
    }
    const { type, payload, flags } = frame;
    if (frame.version !== VERSION) throw new ProtocolError(`SPDY version ${frame.version}`);
    const need = (n: number) => {
      if (payload.length < n) throw new ProtocolError(`control frame ${type} of ${payload.length} bytes`);
    };
    switch (type) {
      case TYPE.synStream: {
        need(10);
        const id = payload.readUInt32BE(0) & 0x7fffffff;
        // Every header block goes through the one inflater, even that of a stream refused below.
        const headers = parseHeaderBlock(await this.#inflater.run(payload.subarray(10)));
        // Client streams are odd and increasing (§2.3.2).
        if (id % 2 === 0 || id <= this.#lastStreamId) throw new ProtocolError(`stream id ${id}`);
        this.#lastStreamId = id;
        if (this.#streams.size >= MAX_STREAMS) {
          this.#owner.reset(id, RST_STATUS.refusedStream);
          return;
        }
        const stream = new SpdyStream(id, headers, this.#owner);
        this.#streams.set(id, stream);
        if (flags & FLAG_FIN) stream.push(null);
        this.#onStream(stream);
        return;
      }
      case TYPE.synReply:
      case TYPE.headers:
        // Not sent by port-forward clients; decompressed only to keep the zlib context in step.
        need(4);
        parseHeaderBlock(await this.#inflater.run(payload.subarray(4)));
        return;
      case TYPE.rstStream:
        need(8);
        this.#streams.get(payload.readUInt32BE(0) & 0x7fffffff)?.abort();
        return;
      case TYPE.ping:
        need(4);
        // The client's pings have odd ids; answering them is what keeps client-go's pinger happy.
        if (payload.readUInt32BE(0) % 2 === 1) void this.#send(() => controlFrame(TYPE.ping, 0, payload));
        return;
      default:
        // SETTINGS, GOAWAY (the client then closes the transport), WINDOW_UPDATE, unknown types:
        // nothing to do (§2.2.1 says unknown control frames are ignored).
        return;
    }
  }

  async #synReply(id: number): Promise<Buffer> {
    const id4 = Buffer.alloc(4);
    id4.writeUInt32BE(id);
    const block = await this.#deflater.run(headerBlock(new Map()));
    return controlFrame(TYPE.synReply, 0, Buffer.concat([id4, block]));
  }

  /** Queues a frame; resolves once the transport took it (or the connection is gone: dropped). */
  #send(build: () => Buffer | Promise<Buffer>): Promise<void> {
    const sent = this.#sending.then(async () => {
      if (this.#closed) return;
      const bytes = await build();
      if (this.#closed || this.#transport.write(bytes)) return;
      await new Promise<void>((resolve) => {
        const done = () => {
          this.#transport.off("drain", done).off("close", done);
          resolve();
        };
        this.#transport.on("drain", done).on("close", done);
      });
    });
    // A failure (the deflater destroyed by close) only means the frame is not sent.
    this.#sending = sent.catch(() => {});
    return this.#sending;
  }
}

function rstStream(id: number, status: number): Buffer {
  const payload = Buffer.alloc(8);
  payload.writeUInt32BE(id, 0);
  payload.writeUInt32BE(status, 4);
  return controlFrame(TYPE.rstStream, 0, payload);
}
