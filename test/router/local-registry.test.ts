import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalRegistry, NoTunnelError } from "../../lib/router/index.ts";
import { tunnelFactory } from "./tunnels.ts";

describe("LocalRegistry", () => {
  let tunnels: Awaited<ReturnType<typeof tunnelFactory>>;
  beforeAll(async () => {
    tunnels = await tunnelFactory();
  });
  afterAll(() => tunnels.close());

  it("picks the tunnel with the fewest open streams", async () => {
    const reg = new LocalRegistry();
    const a = await tunnels.next();
    const b = await tunnels.next();
    reg.register("1", a.server);
    reg.register("1", b.server);
    await a.server.open();
    await a.server.open();
    await b.server.open();
    expect(reg.pick("1")).toBe(b.server);
    await b.server.open();
    await b.server.open();
    expect(reg.pick("1")).toBe(a.server);
    expect(reg.pick("2")).toBeUndefined();
  });

  it("excludes draining tunnels and drops closed ones", async () => {
    const reg = new LocalRegistry();
    const a = await tunnels.next();
    const b = await tunnels.next();
    reg.register("7", a.server);
    reg.register("7", b.server);
    const events: string[] = [];
    reg.on("unavailable", (id) => events.push(`unavailable ${id}`));

    a.server.goAway();
    expect(a.server.draining).toBe(true);
    expect(reg.pick("7")).toBe(b.server);

    b.client.goAway(); // the remote end drains: GoAway arrives over the wire
    await once(b.server, "goaway");
    expect(reg.pick("7")).toBeUndefined();
    expect(reg.usable("7")).toBe(false);
    expect(events).toEqual(["unavailable 7"]);
    expect(reg.tunnels("7").size).toBe(2);

    a.client.close();
    b.client.close();
    await Promise.all([once(a.server, "close"), once(b.server, "close")]);
    expect(reg.tunnels("7").size).toBe(0);
    expect(reg.agentIds()).toEqual([]);
    expect(events).toEqual(["unavailable 7"]); // one transition, one event
  });

  it("serves waiters oldest first when a tunnel registers", async () => {
    const reg = new LocalRegistry();
    const order: number[] = [];
    const deadline = Date.now() + 5000;
    const waits = [1, 2, 3].map((n) =>
      reg.wait("9", { deadline }).then((t) => {
        order.push(n);
        return t;
      }),
    );
    expect(reg.waiting("9")).toBe(3);
    const t = await tunnels.next();
    reg.register("9", t.server);
    const got = await Promise.all(waits);
    expect(order).toEqual([1, 2, 3]);
    expect(got.every((g) => g === t.server)).toBe(true);
    expect(reg.waiting()).toBe(0);
  });

  it("a waiter fails at its deadline with NoTunnelError naming the agent", async () => {
    const reg = new LocalRegistry();
    const start = Date.now();
    const err = await reg.wait("42", { deadline: start + 80 }).catch((e) => e);
    expect(err).toBeInstanceOf(NoTunnelError);
    expect((err as NoTunnelError).agentId).toBe("42");
    expect(err.message).toContain("42");
    expect(Date.now() - start).toBeGreaterThanOrEqual(75);
    expect(reg.waiting()).toBe(0);
  });

  it("a waiter fails when its signal aborts, and leaves no trace", async () => {
    const reg = new LocalRegistry();
    const ctl = new AbortController();
    const waiting = reg.wait("5", { deadline: Date.now() + 60_000, signal: ctl.signal });
    expect(reg.waiting("5")).toBe(1);
    const reason = new Error("caller gave up");
    ctl.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    expect(reg.waiting()).toBe(0);
  });

  it("returns a usable tunnel at once without waiting", async () => {
    const reg = new LocalRegistry();
    const t = await tunnels.next();
    reg.register("3", t.server);
    expect(await reg.wait("3", { deadline: Date.now() + 1 })).toBe(t.server);
  });
});
