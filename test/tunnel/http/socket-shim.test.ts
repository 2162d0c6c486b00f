import net from "node:net";
import type { Duplex } from "node:stream";
import { afterEach, expect, test } from "vitest";
import { asSocket } from "../../../lib/tunnel/http/index.ts";
import { closed, next, sessionPair, socketPair, within } from "./harness.ts";

type Pair = Awaited<ReturnType<typeof sessionPair>>;
let pair: Pair | undefined;
afterEach(() => {
  pair?.close();
  pair = undefined;
});

/** Two ends of one yamux stream: a Duplex with none of net.Socket's extras. */
async function streamPair(): Promise<[Duplex, Duplex]> {
  pair = await sessionPair();
  const accepted = new Promise<Duplex>((r) => pair!.server.once("stream", r));
  const opened = await pair.client.open();
  return [opened, await accepted];
}

test("a net.Socket passes through untouched", async () => {
  const [a, b] = await socketPair();
  try {
    expect(asSocket(a, { remoteAddress: "ignored" })).toBe(a);
    expect(a.setTimeout).toBe(net.Socket.prototype.setTimeout);
    expect(a.destroySoon).toBe(net.Socket.prototype.destroySoon);
    expect(a.remoteAddress).toBe("127.0.0.1");
  } finally {
    a.destroy();
    b.destroy();
  }
});

test("a stream gains the socket methods and the peer's address", async () => {
  const [s] = await streamPair();
  const sock = asSocket(s, { remoteAddress: "10.0.0.9", remotePort: 7, remoteFamily: "IPv4" });
  expect(sock).toBe(s);
  expect([sock.remoteAddress, sock.remotePort, sock.remoteFamily]).toEqual(["10.0.0.9", 7, "IPv4"]);
  expect(sock.setNoDelay(true)).toBe(sock);
  expect(sock.setKeepAlive(true, 1000)).toBe(sock);
  expect(sock.ref().unref()).toBe(sock);
  expect(asSocket(sock)).toBe(sock);
});

test("setTimeout emits 'timeout' after idleness; reads and writes postpone it; 0 disarms it", async () => {
  const [a, b] = await streamPair();
  const sock = asSocket(a);
  b.resume();
  const started = performance.now();
  let fired = 0;
  sock.setTimeout(150, () => fired++);
  expect(sock.timeout).toBe(150);
  // Activity every 50 ms for 400 ms, half writes and half reads, keeps it quiet.
  for (let i = 0; i < 8; i++) {
    await new Promise((r) => setTimeout(r, 50));
    if (i % 2) sock.write("w");
    else b.write("r");
  }
  expect(fired).toBe(0);
  sock.resume();
  await within(2000, "'timeout'", next(sock, "timeout"));
  expect(fired).toBe(1);
  expect(performance.now() - started).toBeGreaterThanOrEqual(500);

  sock.setTimeout(100);
  sock.setTimeout(0);
  expect(sock.timeout).toBe(0);
  const quiet = await Promise.race([
    next(sock, "timeout").then(() => "fired"),
    new Promise((r) => setTimeout(() => r("quiet"), 300)),
  ]);
  expect(quiet).toBe("quiet");
});

test("destroySoon half-closes (FIN, not reset) and the stream closes once the peer ends too", async () => {
  const [a, b] = await streamPair();
  const sock = asSocket(a);
  const errors: Error[] = [];
  a.on("error", (e) => errors.push(e));
  b.on("error", (e) => errors.push(e));
  sock.write("last words");
  sock.destroySoon();
  let got = "";
  b.setEncoding("utf8");
  b.on("data", (d: string) => {
    got += d;
  });
  await within(5000, "peer seeing end", next(b, "end"));
  expect(got).toBe("last words");
  expect(a.destroyed).toBe(false);
  a.resume();
  b.end();
  await within(5000, "both ends closing", Promise.all([closed(a), closed(b)]));
  expect(errors).toEqual([]);
});

test("allowHalfOpen: false ends our side when the peer's FIN arrives, as net.connect sockets do", async () => {
  const [a, b] = await streamPair();
  asSocket(a, {}, { allowHalfOpen: false });
  a.resume();
  b.resume();
  b.end();
  await within(5000, "our FIN reaching the peer", next(b, "end"));
  await within(5000, "both ends closing", Promise.all([closed(a), closed(b)]));
});
