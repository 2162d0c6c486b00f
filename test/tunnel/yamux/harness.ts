import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import type net from "node:net";
import type { Duplex } from "node:stream";
import {
  encodeHeader,
  Flag,
  FrameDecoder,
  type FrameHeader,
  FrameType,
  Session,
  type SessionOptions,
  type YamuxStream,
} from "../../../lib/tunnel/yamux/index.ts";
import { sha256Of } from "../../support/digest.ts";
import { socketPair } from "../../support/loopback.ts";
import { until } from "../../support/until.ts";

export { type SessionPair, sessionPair, socketPair } from "../../support/loopback.ts";
export { sha256Of };

/** Echoes every inbound stream back, half-closing when the peer half-closes. */
export function echo(session: Session): void {
  session.on("stream", (s) => {
    s.on("error", () => {});
    s.pipe(s);
  });
}

export function sha256(buf: Uint8Array): string {
  return createHash("sha256").update(buf).digest("hex");
}

/** Writes `data` in pieces of random size, honouring backpressure, then ends unless told not to. */
export async function writeRandomly(
  stream: Duplex,
  data: Buffer,
  maxPiece = 64 * 1024,
  end = true,
): Promise<void> {
  let off = 0;
  while (off < data.length) {
    const n = Math.min(data.length - off, 1 + Math.floor(Math.random() * maxPiece));
    if (!stream.write(data.subarray(off, off + n))) await once(stream, "drain");
    off += n;
  }
  if (end) stream.end();
}

export { randomBytes };

/** The far end of a session as raw bytes: the test writes frames by hand and reads what comes back. */
export class RawPeer {
  readonly frames: Array<{ h: FrameHeader; payload?: Buffer }> = [];
  readonly #decoder = new FrameDecoder(1 << 30, (h, payload) => {
    this.frames.push(payload ? { h, payload: Buffer.from(payload) } : { h });
    if (h.type === FrameType.Ping && h.flags & Flag.SYN && this.answerPings) {
      this.send(encodeHeader(FrameType.Ping, Flag.ACK, 0, h.length));
    }
    for (const w of this.#waiters.splice(0)) w();
  });
  #waiters: Array<() => void> = [];

  /** Answers pings unless told to play dead. */
  answerPings = true;

  constructor(readonly socket: net.Socket) {
    socket.on("data", (c: Buffer) => this.#decoder.push(c));
  }

  send(...frames: Buffer[]): void {
    this.socket.write(Buffer.concat(frames));
  }

  /** Waits for the first frame (from `from` on) matching `pred`. */
  async next(pred: (h: FrameHeader) => boolean, what = "frame", ms = 5000): Promise<FrameHeader> {
    const deadline = Date.now() + ms;
    for (;;) {
      const f = this.frames.find((x) => pred(x.h));
      if (f) return f.h;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, Math.max(1, deadline - Date.now()));
        this.#waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }
}

/** A Session on one end of a socket pair and a RawPeer on the other. */
export async function rawPair(opts: Partial<SessionOptions> & { client?: boolean } = {}) {
  const [a, b] = await socketPair();
  const session = new Session(a, { keepAliveIntervalMs: 0, client: true, ...opts });
  return { session, peer: new RawPeer(b), sockets: [a, b] as const };
}

/**
 * The peer stops reading, and a stream of `session` writes until everything in between is full:
 * the kernel's buffers, then the session's own queue. Resolves once the session's connection is
 * congested and a whole turn of the event loop (its I/O poll included) went by without the
 * connection taking a byte, so no 'drain' is coming until the peer reads again.
 */
export async function stallPeer(session: Session, peer: RawPeer, conn: net.Socket): Promise<YamuxStream> {
  const s = await session.open();
  s.on("error", () => {});
  await peer.next((h) => h.streamId === s.id && (h.flags & Flag.SYN) !== 0, "SYN");
  peer.send(encodeHeader(FrameType.WindowUpdate, Flag.ACK, s.id, 0x7fffffff)); // the window is no limit
  peer.socket.pause();
  const block = Buffer.alloc(64 * 1024, 1);
  const fill = () => {
    while (s.write(block));
  };
  s.on("drain", fill);
  fill();
  let lastOut = -1;
  await until(
    () => {
      const out = session.stats.bytesOut;
      const stalled = out === lastOut && conn.writableNeedDrain;
      lastOut = out;
      return stalled;
    },
    10_000,
    "the connection to stall",
  );
  s.off("drain", fill);
  return s;
}
