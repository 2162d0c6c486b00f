// The one place that reaches into ws: a WebSocket on a stream whose handshake someone else did
// (RFC 8441). If a ws release moves what it relies on, this says so by name.
import { once } from "node:events";
import { Duplex } from "node:stream";
import { describe, expect, test } from "vitest";
import { WebSocket } from "ws";
import { assertInternals, openWebSocketOnStream } from "../../../lib/tunnel/transport/ws-over-stream.ts";

/** Two Duplexes joined back to back, as an HTTP/2 stream's two ends would be. */
function duplexPair(): [Duplex, Duplex] {
  let a: Duplex;
  let b: Duplex;
  const make = (other: () => Duplex) =>
    new Duplex({
      read() {},
      write(chunk, _enc, done) {
        other().push(chunk);
        done();
      },
      final(done) {
        other().push(null);
        done();
      },
    });
  a = make(() => b);
  b = make(() => a);
  return [a, b];
}

describe("ws internals for RFC 8441", () => {
  test("the installed ws has setSocket, _isServer and _protocol on a null-address WebSocket", () => {
    const ws = new (WebSocket as unknown as new (a: null, p: undefined, o: object) => WebSocket)(
      null,
      undefined,
      {},
    );
    expect(() => assertInternals(ws)).not.toThrow();
    expect(() => assertInternals({})).toThrow(/ws no longer has the internals .*setSocket/);
  });

  test("a client end and a server end on a bare stream pair exchange masked frames both ways", async () => {
    const [a, b] = duplexPair();
    const client = openWebSocketOnStream(a, { role: "client", protocol: "p", maxPayload: 1024 });
    const server = openWebSocketOnStream(b, { role: "server", protocol: "p", maxPayload: 1024 });
    expect(client.protocol).toBe("p");
    const toServer = once(server, "message");
    client.send(Buffer.from("from the client"));
    expect(String((await toServer)[0])).toBe("from the client");
    const toClient = once(client, "message");
    server.send(Buffer.from("from the server"));
    expect(String((await toClient)[0])).toBe("from the server");
    // maxPayload holds: an oversized message is an error, and the server closes with 1009.
    const errors: Error[] = [];
    server.on("error", (err) => errors.push(err));
    const closed = new Promise<number>((resolve) => client.once("close", (code: number) => resolve(code)));
    client.send(Buffer.alloc(2048));
    expect(await closed).toBe(1009);
    expect(errors.map((e) => e.message)).toEqual(["Max payload size exceeded"]);
  });
});
