import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { describe, expect, test } from "vitest";
import { ConnectionClosedError, TUNNEL_SUBPROTOCOL } from "../../../lib/tunnel/transport/index.ts";
import { within } from "../../support/until.ts";
import { dialed, readBytes, startServer, VARIANTS } from "./helpers.ts";

describe.each(VARIANTS)("$name", (variant) => {
  test("the server's first message, sent synchronously on accept, arrives", async () => {
    const server = await startServer(variant, {
      onConnection: (connection) => connection.stream.write(Buffer.from("first")),
    });
    const client = await dialed(server.url, server.dialOptions);
    expect((await readBytes(client.stream, 5)).toString()).toBe("first");
    expect(client.httpVersion).toBe(variant.http2 ? "h2" : "h1");
    expect(client.subprotocol).toBe(TUNNEL_SUBPROTOCOL);
    const accepted = await server.accepted.next();
    expect(accepted.httpVersion).toBe(variant.http2 ? "h2" : "h1");
    expect(accepted.remoteAddress).toBe("127.0.0.1");
  });

  test("binary data crosses both ways in order, one message per write", async () => {
    const server = await startServer(variant);
    const client = await dialed(server.url, server.dialOptions);
    const peer = await server.accepted.next();
    const sizes = [1, 0x7d, 0x7e, 0xffff, 0x10000, 1 << 20, 3, 200_000];
    const chunks = sizes.map((n) => randomBytes(n));
    const total = Buffer.concat(chunks);

    for (const [from, to] of [
      [client, peer],
      [peer, client],
    ] as const) {
      let messages = 0;
      const count = (data: Buffer) => {
        messages += 1;
        expect(Buffer.isBuffer(data)).toBe(true);
      };
      to.ws.on("message", count);
      const received = readBytes(to.stream, total.length);
      for (const chunk of chunks) from.stream.write(chunk);
      expect((await received).equals(total)).toBe(true);
      expect(messages).toBe(chunks.length);
      to.ws.removeListener("message", count);
    }
  });

  test("close() by the client: 'close' fires on both ends and the server's stream ends", async () => {
    const server = await startServer(variant);
    const client = await dialed(server.url, server.dialOptions);
    const peer = await server.accepted.next();
    const ended = once(peer.stream, "end");
    peer.stream.resume();
    client.close(1000, "bye");
    client.close(1000, "again"); // idempotent
    const [mine, theirs] = await within(Promise.all([client.closed, peer.closed]), 5000, "both closes");
    expect(mine).toMatchObject({ code: 1000, local: true });
    expect(theirs).toMatchObject({ code: 1000, reason: "bye", local: false });
    await within(ended, 5000, "server stream end");
    expect(client.isClosed && peer.isClosed).toBe(true);
  });

  test("ending the server's stream closes the connection gracefully", async () => {
    const server = await startServer(variant);
    const client = await dialed(server.url, server.dialOptions);
    const peer = await server.accepted.next();
    const closeEvent = once(client, "close");
    const clientEnded = once(client.stream, "end");
    const peerClosed = once(peer.stream, "close");
    client.stream.resume();
    peer.stream.resume();
    peer.stream.end(Buffer.from("last words"));
    const [info] = await within(closeEvent, 5000, "client close event");
    expect(info).toMatchObject({ code: 1000, local: false });
    await within(clientEnded, 5000, "client stream end");
    await within(peerClosed, 5000, "server stream close");
  });

  test("a peer that vanishes without a close frame: 'close' fires and the stream errors", async () => {
    const server = await startServer(variant);
    const client = await dialed(server.url, server.dialOptions);
    const peer = await server.accepted.next();
    const streamError = new Promise<Error>((resolve) => peer.stream.once("error", resolve));
    client.destroy();
    const info = await within(peer.closed, 5000, "server close");
    expect(info.code).toBe(1006);
    const err = await within(streamError, 5000, "server stream error");
    expect(err).toBeInstanceOf(ConnectionClosedError);
    expect((err as ConnectionClosedError).closeCode).toBe(1006);
  });

  test("listener.close() closes live tunnels with 1001 on the client", async () => {
    const server = await startServer(variant);
    const client = await dialed(server.url, server.dialOptions);
    await server.accepted.next();
    const ended = once(client.stream, "end");
    client.stream.resume();
    await within(server.listener.close(), 5000, "listener close");
    expect(await within(client.closed, 5000, "client close")).toMatchObject({ code: 1001 });
    await within(ended, 5000, "client stream end");
  });
});
