import { once } from "node:events";
import { describe, expect, test } from "vitest";
import { SMALL_FRAME_MAX } from "../../../lib/tunnel/transport/ws-frame.ts";
import { until, within } from "../../support/until.ts";
import { dialed, readBytes, startServer, VARIANTS } from "./helpers.ts";

describe.each(VARIANTS)("$name: the message path beside the stream", (variant) => {
  test("receive(): bytes buffered before it come first, in order, then each live message; the stream still ends", async () => {
    const server = await startServer(variant);
    const client = await dialed(server.url, server.dialOptions);
    const peer = await server.accepted.next();
    // Two messages arrive while nobody reads: they wait in the stream's readable side.
    client.stream.write(Buffer.from("one"));
    client.stream.write(Buffer.from("two"));
    await until(() => peer.stream.readableLength === 6, 5000, "two buffered messages");
    const got: string[] = [];
    peer.messages.receive((m) => got.push(m.toString()));
    expect(got).toEqual([]); // not before the next tick: the caller may still be adding listeners
    await until(() => got.join("") === "onetwo", 5000, "the buffered bytes");
    client.stream.write(Buffer.from("three"));
    await until(() => got.join("").length === 11, 5000, "a live message");
    // The buffered bytes may come joined (the readable side keeps bytes); live messages come one by one.
    expect(got.join("")).toBe("onetwothree");
    expect(got.at(-1)).toBe("three");
    expect(peer.stream.readableLength).toBe(0);
    const ended = once(peer.stream, "end");
    client.close();
    await within(ended, 5000, "the readable side's end");
  });

  test("sendNow(): sends when nothing waits; refuses while a write is queued, so order is kept", async () => {
    const server = await startServer(variant);
    const client = await dialed(server.url, server.dialOptions);
    const peer = await server.accepted.next();
    const received = readBytes(peer.stream, 6);
    expect(client.messages.sendNow(Buffer.from("abc"))).toBe(true);
    client.stream.cork();
    client.stream.write(Buffer.from("de"));
    expect(client.messages.sendNow(Buffer.from("X"))).toBe(false); // would overtake "de"
    client.stream.write(Buffer.from("f"));
    client.stream.uncork();
    expect((await received).toString()).toBe("abcdef");
  });

  test("sendNow(): small messages (framed here) and large ones (framed by ws) arrive whole and in order, both ways", async () => {
    const server = await startServer(variant);
    const client = await dialed(server.url, server.dialOptions);
    const peer = await server.accepted.next();
    const sizes = [1, 125, 126, SMALL_FRAME_MAX, SMALL_FRAME_MAX + 1, 70_000, 2];
    const messages = sizes.map((n, i) => Buffer.alloc(n, i + 1));
    for (const [from, to] of [
      [client, peer],
      [peer, client],
    ] as const) {
      const got: Buffer[] = [];
      to.messages.receive((m) => got.push(Buffer.from(m)));
      for (const m of messages) {
        // A refused send (a large one still in the socket) goes through the stream, behind it.
        if (!from.messages.sendNow(m)) from.stream.write(m);
      }
      await until(() => got.length === messages.length, 5000, "every message");
      expect(got).toEqual(messages);
    }
  });
});
