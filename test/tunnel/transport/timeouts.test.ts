import { once } from "node:events";
import * as http2 from "node:http2";
import { type AddressInfo, connect, createServer, type Server, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { describe, expect, onTestFinished, test } from "vitest";
import { dial, TransportError } from "../../../lib/tunnel/transport/index.ts";
import { within } from "../../support/until.ts";
import { startServer } from "./helpers.ts";

/** A TCP server that accepts connections and never says anything. */
async function silentServer(): Promise<{ port: number; accepted: Socket[] }> {
  const accepted: Socket[] = [];
  const server: Server = createServer((socket) => {
    accepted.push(socket);
    socket.on("error", () => {});
    socket.resume(); // read (and discard) so the client's close is seen
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  onTestFinished(() => {
    for (const socket of accepted) socket.destroy();
    server.close();
  });
  return { port: (server.address() as AddressInfo).port, accepted };
}

function failure(promise: Promise<unknown>): Promise<TransportError> {
  return promise.then(
    () => {
      throw new Error("unexpectedly succeeded");
    },
    (e: unknown) => e as TransportError,
  );
}

describe("client handshake deadline and abort", () => {
  test.each([
    ["ws", false],
    ["ws", true],
    ["wss", false],
    ["wss", true],
  ] as const)(
    "%s:// http2=%s against a server that never answers: HANDSHAKE_TIMEOUT",
    async (scheme, http2) => {
      const silent = await silentServer();
      const started = Date.now();
      const err = await within(
        failure(
          dial(`${scheme}://127.0.0.1:${silent.port}/`, { http2, handshakeTimeoutMs: 300, proxy: false }),
        ),
        5000,
        "the dial to fail",
      );
      expect(err).toBeInstanceOf(TransportError);
      expect(err.code).toBe("HANDSHAKE_TIMEOUT");
      expect(err.message).toContain("did not complete within 300 ms");
      expect(Date.now() - started).toBeGreaterThanOrEqual(280);
      // The abandoned attempt's socket is closed, not leaked.
      await within(Promise.all(silent.accepted.map((s) => once(s, "close"))), 5000, "server side close");
    },
  );

  test.each([false, true])(
    "aborting mid-dial (http2=%s) rejects with ABORTED carrying the reason",
    async (http2) => {
      const silent = await silentServer();
      const controller = new AbortController();
      const pending = failure(
        dial(`ws://127.0.0.1:${silent.port}/`, { http2, signal: controller.signal, proxy: false }),
      );
      while (silent.accepted.length === 0) await new Promise((resolve) => setImmediate(resolve));
      controller.abort(new Error("operator cancelled"));
      const err = await within(pending, 2000, "the dial to fail");
      expect(err.code).toBe("ABORTED");
      expect((err.cause as Error).message).toBe("operator cancelled");
      await within(once(silent.accepted[0] as Socket, "close"), 5000, "server side close");
    },
  );

  test("an already-aborted signal rejects at once", async () => {
    const err = await failure(dial("ws://127.0.0.1:1/", { signal: AbortSignal.abort(), proxy: false }));
    expect(err.code).toBe("ABORTED");
  });

  test("a refused TCP connection is a NETWORK error", async () => {
    // Nothing listens on the port once the server is closed.
    const closed = createServer();
    closed.listen(0, "127.0.0.1");
    await once(closed, "listening");
    const freePort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const err = await failure(dial(`ws://127.0.0.1:${freePort}/`, { proxy: false }));
    expect(err.code).toBe("NETWORK");
    expect(err.message).toContain("ECONNREFUSED");
  });
});

describe("server handshake deadline", () => {
  test.each([false, true])("a client that connects and sends nothing is cut off (tls=%s)", async (tls) => {
    const server = await startServer({ tls }, { handshakeTimeoutMs: 300 });
    const socket = connect(server.listener.address.port, "127.0.0.1");
    socket.on("error", () => {});
    await once(socket, "connect");
    const started = Date.now();
    await within(once(socket, "close"), 5000, "the server to drop the idle connection");
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
  });

  test("a TLS client that completes TLS but sends no request is cut off", async () => {
    const server = await startServer({ tls: true }, { handshakeTimeoutMs: 300 });
    const socket = tlsConnect({
      port: server.listener.address.port,
      host: "127.0.0.1",
      rejectUnauthorized: false,
    });
    socket.on("error", () => {});
    await once(socket, "secureConnect");
    await within(once(socket, "close"), 5000, "the server to drop the idle connection");
  });

  test("an HTTP/1.1 client that stops mid-headers is cut off", async () => {
    const server = await startServer({ tls: false }, { handshakeTimeoutMs: 300 });
    const socket = connect(server.listener.address.port, "127.0.0.1");
    socket.on("error", () => {});
    await once(socket, "connect");
    socket.write("GET / HTTP/1.1\r\nHost: x\r\n");
    await within(once(socket, "close"), 5000, "the server to drop the slow client");
  });

  test("an HTTP/2 connection that opens no stream is closed", async () => {
    const server = await startServer({ tls: false }, { handshakeTimeoutMs: 300 });
    const session = http2.connect(`http://127.0.0.1:${server.listener.address.port}`);
    session.on("error", () => {});
    await within(once(session, "close"), 5000, "the server to close the idle session");
  });
});
