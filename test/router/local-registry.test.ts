import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalRegistry } from "../../lib/router/index.ts";
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

    a.client.destroy();
    b.client.destroy();
    await Promise.all([once(a.server, "close"), once(b.server, "close")]);
    expect(reg.tunnels("7").size).toBe(0);
    expect(reg.agentIds()).toEqual([]);
    expect(events).toEqual(["unavailable 7"]); // one transition, one event
  });

  it("announces every registration and removal once, draining tunnels included", async () => {
    const reg = new LocalRegistry();
    const events: string[] = [];
    const names = new Map<unknown, string>();
    reg.on("added", (id, t) => events.push(`added ${id} ${names.get(t)}`));
    reg.on("removed", (id, t) => events.push(`removed ${id} ${names.get(t)}`));
    const a = await tunnels.next();
    const b = await tunnels.next();
    names.set(a.server, "a").set(b.server, "b");
    reg.register("1", a.server);
    reg.register("1", a.server); // again: no second event
    reg.register("1", b.server);
    b.server.goAway(); // draining: still registered, still listed
    expect(reg.registeredAgentIds()).toEqual(["1"]);
    expect(reg.tunnels("1").size).toBe(2);
    a.client.destroy();
    await once(a.server, "close");
    const unregister = reg.register("2", b.server);
    unregister();
    unregister(); // again: no second event
    b.client.destroy();
    await once(b.server, "close");
    expect(events).toEqual([
      "added 1 a",
      "added 1 b",
      "removed 1 a",
      "added 2 b",
      "removed 2 b",
      "removed 1 b",
    ]);
    expect(reg.registeredAgentIds()).toEqual([]);
  });

  it("a tunnel that closed before it was registered is never announced nor kept", async () => {
    const reg = new LocalRegistry();
    const events: string[] = [];
    reg.on("added", (id) => events.push(`added ${id}`));
    const t = await tunnels.next();
    t.client.destroy();
    await once(t.server, "close");
    reg.register("4", t.server);
    expect(events).toEqual([]);
    expect(reg.registeredAgentIds()).toEqual([]);
  });

  it("whatever follows the events matches the registry after any churn", async () => {
    // Random registrations, GoAways and closes; a follower keeping a count from the events alone
    // must agree with the registry at the end.
    const reg = new LocalRegistry();
    const followed = new Map<string, number>();
    reg.on("added", (id) => followed.set(id, (followed.get(id) ?? 0) + 1));
    reg.on("removed", (id) => followed.set(id, (followed.get(id) ?? 0) - 1));
    const pool = await Promise.all(Array.from({ length: 6 }, () => tunnels.next()));
    const seed = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4];
    for (const [i, n] of seed.entries()) {
      const t = pool[n % pool.length]!;
      if (n % 3 === 0 && !t.server.closed) t.server.goAway();
      reg.register(String(i % 3), t.server);
    }
    for (const t of pool.slice(0, 3)) {
      t.client.destroy();
      await once(t.server, "close");
    }
    for (const id of ["0", "1", "2"]) expect(followed.get(id) ?? 0).toBe(reg.tunnels(id).size);
  });
  it("a draining tunnel is registered but not usable: no 'available', not among agentIds", async () => {
    const reg = new LocalRegistry();
    const events: string[] = [];
    reg.on("available", (id) => events.push(`available ${id}`));
    const a = await tunnels.next();
    a.server.goAway();
    reg.register("3", a.server);
    expect(reg.registeredAgentIds()).toEqual(["3"]);
    expect(reg.agentIds()).toEqual([]);
    expect(reg.usable("3")).toBe(false);
    expect(events).toEqual([]);
    const b = await tunnels.next();
    reg.register("3", b.server);
    expect(reg.agentIds()).toEqual(["3"]);
    expect(reg.usable("3")).toBe(true);
    expect(events).toEqual(["available 3"]);
  });

  it("unregistering stops watching the tunnel once no agent id is left on it", async () => {
    const reg = new LocalRegistry();
    const a = await tunnels.next();
    const listeners = () => [a.server.listenerCount("close"), a.server.listenerCount("goaway")];
    const before = listeners();
    const off4 = reg.register("4", a.server);
    const off5 = reg.register("5", a.server);
    expect(listeners()).toEqual([before[0]! + 1, before[1]! + 1]); // one pair, however many ids
    off4();
    expect(listeners()).toEqual([before[0]! + 1, before[1]! + 1]);
    off5();
    expect(listeners()).toEqual(before);
    expect(reg.registeredAgentIds()).toEqual([]);
  });
});
