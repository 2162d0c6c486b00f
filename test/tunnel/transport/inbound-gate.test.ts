import { EventEmitter, once } from "node:events";
import type { Socket } from "node:net";
import { setImmediate as nextTurn } from "node:timers/promises";
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { serveTunnels, TunnelClient } from "../../../lib/tunnel/index.ts";
import { ConnectionClosedError } from "../../../lib/tunnel/transport/errors.ts";
import { InboundGate } from "../../../lib/tunnel/transport/inbound-gate.ts";
import { createBinaryDuplex } from "../../../lib/tunnel/transport/ws-duplex.ts";
import { until, within } from "../../support/until.ts";

/** A gate on a clock the test moves: each delivery "costs" what the message says, in ms. */
function harness(newForMs: number, budgetMs: number) {
  let clock = 0;
  const gate = new InboundGate(newForMs, budgetMs, () => clock);
  const delivered: string[] = [];
  const paused = new Set<string>();
  const input = (name: string) =>
    gate.open(
      (m) => {
        const [label, cost] = m.toString().split(":");
        delivered.push(`${name}:${label}`);
        clock += Number(cost ?? 0);
      },
      () => paused.add(name),
      () => paused.delete(name),
    );
  const msg = (label: string, cost = 0) => Buffer.from(`${label}:${cost}`);
  return {
    gate,
    delivered,
    paused,
    input,
    msg,
    advance: (ms: number) => {
      clock += ms;
    },
  };
}

describe("InboundGate", () => {
  test("new connections' input beyond a turn's budget waits for later turns, oldest first, each in order", async () => {
    const h = harness(10_000, 10);
    const a = h.input("a");
    const b = h.input("b");
    a.push(h.msg("1", 6));
    a.push(h.msg("2", 6)); // 12 ms spent this turn: the budget is gone
    b.push(h.msg("1", 1));
    a.push(h.msg("3", 1));
    b.push(h.msg("2", 1));
    expect(h.delivered).toEqual(["a:1", "a:2"]);
    expect([...h.paused].sort()).toEqual(["a", "b"]);
    expect(h.gate.waiting).toBe(2);
    await nextTurn();
    // b began to wait first; a's third message waits behind it, after a's own.
    expect(h.delivered).toEqual(["a:1", "a:2", "b:1", "b:2", "a:3"]);
    expect(h.paused.size).toBe(0);
    expect(h.gate.waiting).toBe(0);
  });

  test("a later turn spends one budget: what does not fit waits another turn", async () => {
    const h = harness(10_000, 10);
    const inputs = ["a", "b", "c", "d"].map((n) => h.input(n));
    h.advance(0);
    inputs[0]!.push(h.msg("1", 10));
    for (const i of inputs.slice(1)) i.push(h.msg("1", 7));
    expect(h.delivered).toEqual(["a:1"]);
    await nextTurn();
    expect(h.delivered).toEqual(["a:1", "b:1", "c:1"]); // 14 ms: past the budget after c
    expect(h.paused).toEqual(new Set(["d"]));
    await nextTurn();
    expect(h.delivered).toEqual(["a:1", "b:1", "c:1", "d:1"]);
    expect(h.paused.size).toBe(0);
  });

  test("an established connection's input is never held, even while new ones wait", async () => {
    const h = harness(1000, 10);
    const old = h.input("old");
    h.advance(1000);
    const fresh = h.input("new");
    fresh.push(h.msg("1", 20));
    fresh.push(h.msg("2", 1));
    old.push(h.msg("1", 1));
    expect(h.delivered).toEqual(["new:1", "old:1"]);
    expect(h.paused).toEqual(new Set(["new"]));
    await nextTurn();
    expect(h.delivered).toEqual(["new:1", "old:1", "new:2"]);
  });

  test("a connection that comes of age while holding messages still delivers them first", async () => {
    const h = harness(100, 10);
    const a = h.input("a");
    a.push(h.msg("1", 50));
    a.push(h.msg("2", 0));
    h.advance(100);
    a.push(h.msg("3", 0)); // of age, but 2 is held: 3 waits behind it
    expect(h.delivered).toEqual(["a:1"]);
    expect(a.settled).toBe(false); // of age, but holding
    await nextTurn();
    expect(h.delivered).toEqual(["a:1", "a:2", "a:3"]);
    a.push(h.msg("4", 50));
    expect(a.settled).toBe(true);
    a.push(h.msg("5", 50)); // of age and nothing held: straight through, whatever the budget
    expect(h.delivered).toEqual(["a:1", "a:2", "a:3", "a:4", "a:5"]);
  });

  test("flush delivers what is held at once; drop discards it; neither is delivered again", async () => {
    const h = harness(10_000, 10);
    const a = h.input("a");
    const b = h.input("b");
    a.push(h.msg("1", 10));
    a.push(h.msg("2"));
    a.push(h.msg("3"));
    b.push(h.msg("1"));
    a.flush();
    expect(h.delivered).toEqual(["a:1", "a:2", "a:3"]);
    b.drop();
    expect(h.gate.waiting).toBe(0);
    await nextTurn();
    await nextTurn();
    expect(h.delivered).toEqual(["a:1", "a:2", "a:3"]);
  });

  test("a delivery that ends its own connection does not cost the next one its place", async () => {
    const h = harness(10_000, 10);
    const a = h.input("a");
    // Its first held message ends it (as a session would, destroying its connection): drop().
    const ending: ReturnType<typeof h.input> = h.gate.open(
      (m) => {
        h.delivered.push(`ending:${m}`);
        ending.drop();
      },
      () => {},
      () => {},
    );
    const b = h.input("b");
    a.push(h.msg("1", 10)); // the budget is gone
    ending.push(Buffer.from("x"));
    ending.push(Buffer.from("y")); // dropped with it
    b.push(h.msg("1"));
    await nextTurn();
    expect(h.delivered).toEqual(["a:1", "ending:x", "b:1"]);
    expect(h.gate.waiting).toBe(0);
  });

  test("a delivery that throws does not stop the others' turn", async () => {
    const h = harness(10_000, 10);
    const a = h.input("a");
    const failing = h.gate.open(
      () => {
        throw new Error("a session's bug");
      },
      () => {},
      () => {},
    );
    const b = h.input("b");
    a.push(h.msg("1", 10));
    failing.push(Buffer.from("x"));
    b.push(h.msg("1"));
    const thrown = new Promise<Error>((resolve) => process.once("uncaughtException", resolve));
    await nextTurn();
    expect((await thrown).message).toBe("a session's bug");
    for (let i = 0; i < 3 && h.gate.waiting > 0; i++) await nextTurn();
    expect(h.delivered).toEqual(["a:1", "b:1"]);
    expect(h.gate.waiting).toBe(0);
  });

  test("property: every message is delivered once, in each connection's order, whatever the costs and ages", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ conn: fc.nat(4), cost: fc.nat(15), wait: fc.nat(40) }), { maxLength: 60 }),
        async (steps) => {
          const h = harness(50, 10);
          const inputs = [0, 1, 2, 3, 4].map((n) => h.input(String(n)));
          const sent: string[][] = [[], [], [], [], []];
          for (const [i, s] of steps.entries()) {
            h.advance(s.wait);
            inputs[s.conn]!.push(h.msg(String(i), s.cost));
            sent[s.conn]!.push(`${s.conn}:${i}`);
            if (i % 7 === 6) await nextTurn();
          }
          for (let turns = 0; h.gate.waiting > 0 && turns < 1000; turns++) await nextTurn();
          expect(h.gate.waiting).toBe(0);
          expect(h.paused.size).toBe(0);
          for (const [c, list] of sent.entries())
            expect(h.delivered.filter((d) => d.startsWith(`${c}:`))).toEqual(list);
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe("a paced acceptor gates new tunnels' input", () => {
  test("a burst of new tunnels' first messages is spread over turns of the loop, every one answered", async () => {
    const COST_MS = 3;
    const TUNNELS = 40;
    let burns = 0;
    const perTurn: number[] = [];
    const server = await serveTunnels({
      host: "127.0.0.1",
      maxLoopUtilization: 0.5,
      onSession: (session) =>
        session.on("stream", (stream) => {
          stream.on("error", () => {}); // cut at the end, when the clients go
          stream.on("data", (chunk: Buffer) => {
            const until = performance.now() + COST_MS;
            while (performance.now() < until); // what a module's first message costs
            burns++;
            stream.write(chunk);
          });
        }),
    });
    const clients: TunnelClient[] = [];
    try {
      const sessions = await Promise.all(
        Array.from({ length: TUNNELS }, async () => {
          const client = new TunnelClient({ url: server.url, dial: { proxy: false } }).start();
          clients.push(client);
          return client.ready(10_000);
        }),
      );
      const streams = await Promise.all(sessions.map((s) => s.open()));
      for (const s of streams) s.on("error", () => {});
      let counting = true;
      const count = () =>
        setImmediate(() => {
          if (burns > 0) perTurn.push(burns);
          burns = 0;
          if (counting) count();
        });
      count();
      await within(
        Promise.all(
          streams.map(async (s, i) => {
            s.write(Buffer.from(`m${i}`));
            const [answer] = (await once(s, "data")) as [Buffer];
            expect(answer.toString()).toBe(`m${i}`);
          }),
        ),
        10_000,
        "every message answered",
      );
      counting = false;
      expect(perTurn.reduce((a, b) => a + b, 0) + burns).toBe(TUNNELS);
      // About 10 ms of them in the poll phase and 10 in the check phase of a turn: 4 + 4 at 3 ms,
      // with room for a timer's slack. Ungated, the 40 arrive in one or two polls.
      expect(Math.max(...perTurn)).toBeLessThanOrEqual(12);
      expect(perTurn.length).toBeGreaterThanOrEqual(4);
    } finally {
      await Promise.all(clients.map((c) => c.close(0)));
      await server.close(0);
    }
  });
});

/** Just enough of a server-side ws.WebSocket for createBinaryDuplex: messages and closes emitted by the test. */
class FakeServerWs extends EventEmitter {
  readyState: number = WebSocket.OPEN;
  isPaused = false;
  readonly _isServer = true;
  pause() {
    this.isPaused = true;
  }
  resume() {
    this.isPaused = false;
  }
  send() {}
  close() {}
  terminate() {
    this.readyState = WebSocket.CLOSED;
  }
}

describe("the gate on a tunnel's WebSocket (ws-duplex)", () => {
  async function gated() {
    let clock = 0;
    const gate = new InboundGate(10_000, 10, () => clock);
    const ws = new FakeServerWs();
    const { stream, messages } = createBinaryDuplex(
      ws as unknown as WebSocket,
      { closedLocally: () => false, close: () => {} },
      gate,
    );
    const got: string[] = [];
    messages.receive((m) => {
      got.push(m.toString());
      clock += 5;
    });
    await new Promise((resolve) => process.nextTick(resolve)); // receive() takes over on the next tick
    for (const m of ["1", "2", "3", "4", "5"]) ws.emit("message", Buffer.from(m), true);
    expect(got).toEqual(["1", "2"]); // the budget is gone: the rest is held
    expect(ws.isPaused).toBe(true);
    return { gate, ws, stream, got };
  }

  test.each([
    [1000, "a clean close"],
    [1006, "a connection lost"],
  ])("what the peer sent before %i (%s) reaches the session first, in order", async (code) => {
    const { gate, ws, stream, got } = await gated();
    const ended = new Promise((resolve) => {
      stream.on("end", () => resolve("end"));
      stream.on("error", (err) => resolve(err));
    });
    stream.resume();
    ws.readyState = WebSocket.CLOSED;
    ws.emit("close", code, Buffer.alloc(0));
    expect(got).toEqual(["1", "2", "3", "4", "5"]);
    expect(gate.waiting).toBe(0);
    const how = await ended;
    if (code === 1000) expect(how).toBe("end");
    else expect(how).toBeInstanceOf(ConnectionClosedError);
  });

  test("destroyed by this end, what is held is dropped, not delivered later", async () => {
    const { gate, stream, got } = await gated();
    stream.on("error", () => {});
    stream.destroy();
    expect(gate.waiting).toBe(0);
    await nextTurn();
    await nextTurn();
    expect(got).toEqual(["1", "2"]);
  });
});

describe("a flood into a gated tunnel (real WebSocket over TCP)", () => {
  test("once the gate holds, the server stops reading the socket: a peer's flood waits in its own buffers", async () => {
    // A gate that never has room again after its first delivery: each look at the clock is 100 ms later.
    let clock = 0;
    const gate = new InboundGate(Number.MAX_SAFE_INTEGER / 2, 10, () => (clock += 100));
    const wss = new WebSocketServer({ host: "127.0.0.1", port: 0 });
    await once(wss, "listening");
    const { port } = wss.address() as { port: number };
    let delivered = 0;
    const served = new Promise<{ duplex: ReturnType<typeof createBinaryDuplex>; socket: Socket }>((resolve) =>
      wss.once("connection", (ws) => {
        const duplex = createBinaryDuplex(ws, { closedLocally: () => false, close: () => ws.close() }, gate);
        duplex.stream.on("error", () => {});
        duplex.messages.receive((m) => {
          delivered += m.length;
        });
        resolve({ duplex, socket: (ws as unknown as { _socket: Socket })._socket });
      }),
    );
    const client = new WebSocket(`ws://127.0.0.1:${port}`);
    client.on("error", () => {});
    try {
      await within(once(client, "open"), 5_000, "the client's handshake");
      const { duplex, socket } = await served;
      const MESSAGE = 64 * 1024;
      const SENT = 16 * 1024 * 1024;
      const payload = Buffer.alloc(MESSAGE, 7);
      for (let n = 0; n < SENT; n += MESSAGE) client.send(payload, { binary: true });
      // Held input pauses the WebSocket; the socket then reads until its buffer is full, and stops.
      await until(
        () => socket.readableLength >= socket.readableHighWaterMark,
        10_000,
        "the server's socket to stop reading",
      );
      const read = socket.bytesRead;
      for (let i = 0; i < 20; i++) await nextTurn();
      expect(socket.bytesRead).toBe(read);
      // What the server took in: a delivered message, what ws parsed from the reads before the
      // pause (held by the gate), the socket's full buffer. The rest waits on the peer's side.
      expect(delivered).toBe(MESSAGE);
      expect(read).toBeLessThan(1024 * 1024);
      expect(client.bufferedAmount).toBeGreaterThan(SENT / 2);
      expect(gate.waiting).toBe(1);
      duplex.stream.destroy();
      expect(gate.waiting).toBe(0);
    } finally {
      client.terminate();
      for (const ws of wss.clients) ws.terminate();
      await new Promise((resolve) => wss.close(resolve));
    }
  });
});
