import { once } from "node:events";
import net from "node:net";
import type { Duplex } from "node:stream";
import { afterEach, expect, test, vi } from "vitest";
import { asSocket } from "../../../lib/tunnel/http/index.ts";
import { within } from "../../support/until.ts";
import { closed, next, sessionPair, socketPair } from "./harness.ts";

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
  sock.resume();
  let fired = 0;
  // The idle timer on a fake clock; the bytes still travel for real (each step waits for them).
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  try {
    sock.setTimeout(150, () => fired++);
    expect(sock.timeout).toBe(150);
    // Activity every 100 ms for 800 ms, half writes and half reads, keeps it quiet.
    for (let i = 0; i < 8; i++) {
      if (i % 2) sock.write("w");
      else {
        b.write("r");
        await once(sock, "data");
      }
      await vi.advanceTimersByTimeAsync(100);
    }
    expect(fired).toBe(0);
    await vi.advanceTimersByTimeAsync(49); // 149 ms since the last activity
    expect(fired).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(fired).toBe(1);

    sock.setTimeout(100);
    sock.setTimeout(0);
    expect(sock.timeout).toBe(0);
    await vi.advanceTimersByTimeAsync(1000);
    expect(fired).toBe(1);
  } finally {
    vi.useRealTimers();
  }
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
  await within(next(b, "end"), 5000, "peer seeing end");
  expect(got).toBe("last words");
  expect(a.destroyed).toBe(false);
  a.resume();
  b.end();
  await within(Promise.all([closed(a), closed(b)]), 5000, "both ends closing");
  expect(errors).toEqual([]);
});

test("allowHalfOpen: false ends our side when the peer's FIN arrives, as net.connect sockets do", async () => {
  const [a, b] = await streamPair();
  asSocket(a, {}, { allowHalfOpen: false });
  a.resume();
  b.resume();
  b.end();
  await within(next(b, "end"), 5000, "our FIN reaching the peer");
  await within(Promise.all([closed(a), closed(b)]), 5000, "both ends closing");
});
