import { once } from "node:events";
import { connect, createServer, type Socket } from "node:net";
import { Duplex } from "node:stream";
import { afterAll, beforeAll, expect, test } from "vitest";
import { splice } from "../../lib/router/splice.ts";
import { within } from "../support/until.ts";

let server: ReturnType<typeof createServer>;
beforeAll(async () => {
  server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** A half-open stream standing for a tunnel stream: it ends only when told. */
const halfOpen = () => new Duplex({ allowHalfOpen: true, read() {}, write: (_c, _e, cb) => cb() });

test("a client socket that closes cleanly (its FIN, then its own auto-end) resets the other side: splice settles", async () => {
  const accepted = once(server, "connection") as Promise<[Socket]>;
  const client = connect((server.address() as { port: number }).port, "127.0.0.1");
  const [socket] = await accepted;
  const stream = halfOpen();
  const done = splice(socket, stream);
  // The other side still has something to say, but the client is gone.
  stream.push("late");
  client.end();
  await within(done, 2000, "splice to settle after the client closed");
  expect(stream.destroyed).toBe(true);
  client.destroy();
});

test("both sides ending in turn close cleanly, nothing reset", async () => {
  const accepted = once(server, "connection") as Promise<[Socket]>;
  const client = connect({
    port: (server.address() as { port: number }).port,
    host: "127.0.0.1",
    allowHalfOpen: true,
  });
  const [socket] = await accepted;
  const stream = halfOpen();
  let reset = false;
  stream.on("close", () => {
    reset = !stream.writableFinished;
  });
  const done = splice(socket, stream);
  let got = "";
  client.setEncoding("utf8").on("data", (c: string) => {
    got += c;
  });
  stream.push("bye");
  stream.push(null);
  await once(client, "end");
  client.end();
  await within(done, 2000, "splice to settle after both sides ended");
  expect(got).toBe("bye");
  expect(reset).toBe(false);
});

test("a stream already closed when spliced resets the other side at once, and splice settles", async () => {
  const gone = halfOpen();
  gone.destroy();
  await once(gone, "close");
  const other = halfOpen();
  await within(splice(gone, other), 2000, "splice of a closed stream to settle");
  expect(other.destroyed).toBe(true);
});

test("an error on one side resets the other; nobody else needs to listen for it", async () => {
  const a = halfOpen();
  const b = halfOpen();
  const done = splice(a, b);
  a.destroy(new Error("peer reset"));
  await within(done, 2000, "splice to settle after a reset");
  expect(b.destroyed).toBe(true);
  expect(b.writableFinished).toBe(false);
});

test("when one side closes, the other is reset unless the closed one finished both directions", async () => {
  for (const finishes of [true, false]) {
    // `a` may never finish writing (a reset raced its FIN); `b` stays open once both its directions ended.
    const a = new Duplex({
      allowHalfOpen: true,
      read() {},
      write: (_c, _e, cb) => cb(),
      final: (cb) => {
        if (finishes) cb();
      },
    });
    const b = new Duplex({ allowHalfOpen: true, autoDestroy: false, read() {}, write: (_c, _e, cb) => cb() });
    const done = splice(a, b);
    a.push(null);
    b.push(null);
    await Promise.all([once(b, "end"), once(b, "finish")]);
    expect(a.writableEnded).toBe(true);
    expect(a.writableFinished).toBe(finishes);
    // A clean `a` has closed by itself already.
    const closing = a.closed ? Promise.resolve() : once(a, "close");
    a.destroy();
    await closing;
    expect(b.destroyed, `a finishes: ${finishes}`).toBe(!finishes);
    b.destroy();
    await within(done, 2000, "splice to settle");
  }
});
