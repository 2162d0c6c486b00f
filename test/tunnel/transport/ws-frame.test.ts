// binaryFrame: small messages framed by hand must read exactly as ws' own frames do, at each
// length boundary, masked (client to server) and not (server to client).
import { once } from "node:events";
import { Duplex } from "node:stream";
import { describe, expect, test } from "vitest";
import type { WebSocket } from "ws";
import { binaryFrame, SMALL_FRAME_MAX } from "../../../lib/tunnel/transport/ws-frame.ts";
import { openWebSocketOnStream } from "../../../lib/tunnel/transport/ws-over-stream.ts";

/** A WebSocket end fed by hand: what is pushed into `raw` is what it reads from the wire. */
function receivingEnd(role: "client" | "server"): { ws: WebSocket; raw: Duplex } {
  const raw = new Duplex({
    read() {},
    write(_chunk, _enc, done) {
      done();
    },
  });
  return { ws: openWebSocketOnStream(raw, { role, protocol: "p", maxPayload: 1 << 20 }), raw };
}

const LENGTHS = [0, 1, 3, 4, 5, 125, 126, 127, 1000, SMALL_FRAME_MAX];

function payloadOf(n: number): Buffer {
  return Buffer.from(Array.from({ length: n }, (_, i) => (i * 7 + 3) & 0xff));
}

describe("binaryFrame", () => {
  test("the header: FIN and binary opcode, 7-bit length up to 125, 16-bit length above; the mask bit", () => {
    expect([...binaryFrame(Buffer.from("ab"), false)]).toEqual([0x82, 2, 0x61, 0x62]);
    expect([...binaryFrame(payloadOf(125), false).subarray(0, 2)]).toEqual([0x82, 125]);
    expect([...binaryFrame(payloadOf(126), false).subarray(0, 4)]).toEqual([0x82, 126, 0, 126]);
    expect(binaryFrame(payloadOf(126), false).length).toBe(4 + 126);
    const masked = binaryFrame(payloadOf(126), true);
    expect([...masked.subarray(0, 4)]).toEqual([0x82, 126 | 0x80, 0, 126]);
    expect(masked.length).toBe(4 + 4 + 126);
  });

  test.each(["client", "server"] as const)(
    "a %s's frames arrive as the same binary messages, in order",
    async (role) => {
      // A server end reads a client's (masked) frames; a client end reads a server's (unmasked) ones.
      const { ws, raw } = receivingEnd(role === "client" ? "server" : "client");
      const got: Buffer[] = [];
      ws.on("message", (data: Buffer, isBinary: boolean) => {
        expect(isBinary).toBe(true);
        got.push(Buffer.from(data));
      });
      const sent = LENGTHS.map(payloadOf);
      // Whole frames, one per chunk, then all of them in one chunk cut mid-frame.
      for (const p of sent) raw.push(binaryFrame(p, role === "client"));
      const joined = Buffer.concat(sent.map((p) => binaryFrame(p, role === "client")));
      raw.push(joined.subarray(0, 700));
      raw.push(joined.subarray(700));
      while (got.length < 2 * sent.length) await once(ws, "message");
      expect(got).toEqual([...sent, ...sent]);
    },
  );

  test("masked frames use a fresh key each, and the payload given is left as it was", () => {
    const p = payloadOf(64);
    const copy = Buffer.from(p);
    const keys = new Set(
      Array.from({ length: 50 }, () => binaryFrame(p, true).subarray(2, 6).toString("hex")),
    );
    expect(keys.size).toBeGreaterThan(40);
    expect(p).toEqual(copy);
  });

  test("larger payloads are refused (they go through ws)", () => {
    expect(() => binaryFrame(Buffer.alloc(SMALL_FRAME_MAX + 1), false)).toThrow(RangeError);
  });
});
