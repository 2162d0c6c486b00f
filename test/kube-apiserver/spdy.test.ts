// The test server's SPDY/3.1 (spdy.ts) driven frame by frame by a hand-made client, for what
// kubectl does not show: the header dictionary is spdystream's, one zlib context spans the
// connection, pings are answered, resets arrive, and a malformed frame closes the connection.
import { createHash } from "node:crypto";
import { EventEmitter, once } from "node:events";
import { type AddressInfo, connect, createServer, type Server, type Socket } from "node:net";
import { constants, createDeflate, createInflate, type Deflate, type Inflate } from "node:zlib";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { SpdySession, type SpdyStream } from "../support/kube/spdy.ts";
import { SPDY3_DICTIONARY, SPDY3_DICTIONARY_SHA256 } from "../support/kube/spdy-dictionary.ts";
import { within } from "../support/until.ts";

const SYN_STREAM = 1;
const SYN_REPLY = 2;
const RST_STREAM = 3;
const PING = 6;
const FIN = 1;

interface Frame {
  control: boolean;
  /** Control frames: the type; DATA: the stream id. */
  typeOrStream: number;
  version: number;
  flags: number;
  payload: Buffer;
}

/** The client end: writes frames, reads the server's, keeps its own zlib context each way. */
class Client {
  readonly socket: Socket;
  readonly frames: Frame[] = [];
  #pending = Buffer.alloc(0);
  #closed = false;
  readonly #deflate: Deflate = createDeflate({ dictionary: SPDY3_DICTIONARY, flush: constants.Z_SYNC_FLUSH });
  readonly #inflate: Inflate = createInflate({ dictionary: SPDY3_DICTIONARY, flush: constants.Z_SYNC_FLUSH });

  constructor(port: number) {
    this.socket = connect(port, "127.0.0.1");
    this.socket.on("data", (chunk: Buffer) => {
      this.#pending = Buffer.concat([this.#pending, chunk]);
      while (this.#pending.length >= 8) {
        const length = this.#pending.readUIntBE(5, 3);
        if (this.#pending.length < 8 + length) break;
        const first = this.#pending.readUInt32BE(0);
        const control = (first & 0x80000000) !== 0;
        this.frames.push({
          control,
          typeOrStream: control ? first & 0xffff : first,
          version: control ? (first >>> 16) & 0x7fff : 0,
          flags: this.#pending[4]!,
          payload: this.#pending.subarray(8, 8 + length),
        });
        this.#pending = this.#pending.subarray(8 + length);
      }
    });
    this.socket.on("close", () => (this.#closed = true));
    this.socket.on("error", () => {});
  }

  control(type: number, flags: number, payload: Buffer, version = 3): void {
    const header = Buffer.alloc(8);
    header.writeUInt32BE((0x80000000 | (version << 16) | type) >>> 0, 0);
    header.writeUInt32BE(((flags << 24) | payload.length) >>> 0, 4);
    this.socket.write(Buffer.concat([header, payload]));
  }

  data(stream: number, flags: number, payload: Buffer): void {
    const header = Buffer.alloc(8);
    header.writeUInt32BE(stream, 0);
    header.writeUInt32BE(((flags << 24) | payload.length) >>> 0, 4);
    this.socket.write(Buffer.concat([header, payload]));
  }

  async synStream(id: number, headers: Record<string, string>): Promise<void> {
    const pairs = Object.entries(headers).flat();
    const block = Buffer.concat([
      u32(pairs.length / 2),
      ...pairs.flatMap((text) => [u32(text.length), Buffer.from(text)]),
    ]);
    const prefix = Buffer.concat([u32(id), u32(0), Buffer.from([0, 0])]);
    this.control(SYN_STREAM, 0, Buffer.concat([prefix, await zlib(this.#deflate, block)]));
  }

  /** A SYN_REPLY's header block, decompressed in this connection's context. */
  replyHeaders(frame: Frame): Promise<Buffer> {
    return zlib(this.#inflate, frame.payload.subarray(4));
  }

  /** The first frame received that matches, within 5 s. */
  async frame(match: (f: Frame) => boolean, what: string): Promise<Frame> {
    let check = () => {};
    const found = new Promise<Frame>((resolve, reject) => {
      check = () => {
        const hit = this.frames.find(match);
        if (hit) resolve(hit);
        else if (this.#closed) reject(new Error(`connection closed before ${what}`));
      };
    });
    this.socket.on("data", check).on("close", check);
    check();
    try {
      return await within(found, 5000, what);
    } finally {
      this.socket.off("data", check).off("close", check);
    }
  }

  async closed(): Promise<void> {
    // Not once(): a reset connection also emits "error", which once() would throw.
    const closed = new Promise((resolve) => this.socket.once("close", resolve));
    if (!this.#closed) await within(closed, 5000, "the server to close the connection");
  }

  close(): void {
    this.socket.destroy();
    this.#deflate.destroy();
    this.#inflate.destroy();
  }
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

/** One sync-flushed block through a zlib stream that lives as long as the connection. */
function zlib(z: Deflate | Inflate, input: Buffer): Promise<Buffer> {
  const out: Buffer[] = [];
  const collect = (chunk: Buffer) => out.push(chunk);
  z.on("data", collect);
  return new Promise((resolve, reject) =>
    z.write(input, (err) => {
      z.off("data", collect);
      if (err) reject(err);
      else resolve(Buffer.concat(out));
    }),
  );
}

let server: Server;
let streams: SpdyStream[];
/** Emits "stream" as the server is given each. */
const arrivals = new EventEmitter();
let client: Client;
beforeEach(async () => {
  streams = [];
  server = createServer(
    (socket) =>
      new SpdySession(socket, (stream) => {
        streams.push(stream);
        arrivals.emit("stream");
      }),
  );
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  client = new Client((server.address() as AddressInfo).port);
  await once(client.socket, "connect");
});
afterEach(async () => {
  client.close();
  await new Promise((resolve) => server.close(resolve));
});

describe("SPDY/3.1 server", () => {
  test("the header dictionary is byte for byte spdystream's", () => {
    expect(SPDY3_DICTIONARY.length).toBe(1423);
    expect(createHash("sha256").update(SPDY3_DICTIONARY).digest("hex")).toBe(SPDY3_DICTIONARY_SHA256);
  });

  test("streams: headers through one zlib context, replies, DATA both ways, FIN", async () => {
    await client.synStream(1, { streamtype: "error", port: "8080", requestid: "0" });
    // The second block compresses against the first (the same names and values): the server
    // can read it only if it kept the context.
    await client.synStream(3, { streamtype: "data", port: "8080", requestid: "0" });
    const [error, data] = await Promise.all([waitStream(0), waitStream(1)]);
    expect(Object.fromEntries(error.headers)).toEqual({ streamtype: "error", port: "8080", requestid: "0" });
    expect(Object.fromEntries(data.headers)).toEqual({ streamtype: "data", port: "8080", requestid: "0" });

    error.reply();
    data.reply();
    const replies = [1, 3].map((id) =>
      client.frame(
        (f) => f.control && f.typeOrStream === SYN_REPLY && f.payload.readUInt32BE(0) === id,
        `SYN_REPLY ${id}`,
      ),
    );
    for (const reply of await Promise.all(replies)) {
      expect(reply.version).toBe(3);
      expect(await client.replyHeaders(reply)).toEqual(u32(0)); // no headers
    }

    client.data(3, 0, Buffer.from("hello "));
    client.data(3, FIN, Buffer.from("server"));
    data.setEncoding("utf8");
    let received = "";
    data.on("data", (chunk: string) => (received += chunk));
    await within(once(data, "end"), 5000, "the client's FIN");
    expect(received).toBe("hello server");

    const closed = once(data, "close");
    data.end("hello client");
    const answer = await client.frame(
      (f) => !f.control && f.typeOrStream === 3 && f.payload.length > 0,
      "DATA",
    );
    expect(answer.payload.toString()).toBe("hello client");
    const fin = await client.frame((f) => !f.control && f.typeOrStream === 3 && (f.flags & FIN) !== 0, "FIN");
    expect(fin.payload.length).toBe(0);
    await within(closed, 5000, "the stream to close once both sides finished");
  });

  test("PING is answered; RST_STREAM destroys the stream", async () => {
    client.control(PING, 0, u32(7));
    const pong = await client.frame((f) => f.control && f.typeOrStream === PING, "the PING answer");
    expect(pong.payload.readUInt32BE(0)).toBe(7);

    await client.synStream(1, { streamtype: "data", requestid: "1" });
    const stream = await waitStream(0);
    stream.reply();
    const closed = once(stream, "close");
    client.control(RST_STREAM, 0, Buffer.concat([u32(1), u32(5)]));
    await within(closed, 5000, "the reset stream to close");
    expect(client.frames.filter((f) => f.control && f.typeOrStream === RST_STREAM)).toEqual([]);
  });

  test.each([
    ["a control frame of another SPDY version", (c: Client) => c.control(PING, 0, u32(1), 2)],
    ["a frame longer than the server takes", (c: Client) => c.data(1, 0, Buffer.alloc(1024 * 1024))],
    [
      "a header block that is not zlib",
      (c: Client) =>
        c.control(SYN_STREAM, 0, Buffer.concat([u32(1), u32(0), Buffer.alloc(2), Buffer.from("junk")])),
    ],
    ["a SYN_STREAM too short for its fields", (c: Client) => c.control(SYN_STREAM, 0, Buffer.alloc(6))],
  ])("%s closes the connection", async (_what, send) => {
    send(client);
    await client.closed();
  });

  test("a server-numbered (even) stream id closes the connection", async () => {
    await client.synStream(2, { streamtype: "data" });
    await client.closed();
    expect(streams).toEqual([]);
  });
});

/** The n-th stream the server was given, within 5 s. */
async function waitStream(n: number): Promise<SpdyStream> {
  while (streams.length <= n) await within(once(arrivals, "stream"), 5000, `stream ${n}`);
  return streams[n]!;
}
