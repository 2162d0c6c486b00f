// Router's own rules, beside the end-to-end routing tests: what it refuses before start, the
// deadline and abort of a dial, the header it sends, its opener, where an announcement sends a
// waiting dial, which refusals through a peer end a dial at once, and what start, drain and close
// do to the private API, Redis and waiting dials. One redis-server for the file.
import { once } from "node:events";
import { type AddressInfo, connect, createServer, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import { DEFAULT_DIAL_TIMEOUT_MS, NoTunnelError, Router } from "../../lib/router/index.ts";
import { Kind, RejectCode, StreamDispatcher } from "../../lib/tunnel/header/index.ts";
import { TunnelClient, type TunnelServer } from "../../lib/tunnel/session/index.ts";
import { dial } from "../../lib/tunnel/transport/index.ts";
import { closedPort } from "../support/ports.ts";
import { RedisServer } from "../support/redis-server.ts";
import { until, within } from "../support/until.ts";
import { ask, FAST, PREFIX, readAll, SECRET, serveAgents, startAgent, startReplica } from "./harness.ts";

const HTTP = { kind: Kind.KIND_HTTP, service: "echo" } as const;
const clients: TunnelClient[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close(0)));
});

/** An agent that answers "<header agent id> <service>\n", then echoes. */
async function headerAgent(
  agents: TunnelServer<string>,
  agentId: string,
  router?: Router,
): Promise<TunnelClient> {
  const dispatcher = new StreamDispatcher();
  dispatcher.register(Kind.KIND_HTTP, (stream: Duplex, header) => {
    stream.on("error", () => {});
    stream.write(`${header.agentId} ${header.service}\n`);
    stream.pipe(stream);
  });
  const client = new TunnelClient({
    url: agents.url,
    dial: { headers: { "x-agent-id": agentId } },
    onStream: (stream) => void dispatcher.handle(stream, undefined),
  }).start();
  clients.push(client);
  await client.ready(5000);
  if (router) await until(() => router.local.usable(agentId), 5000, `agent ${agentId} registered`);
  return client;
}

/** An agent that takes every stream and never answers its header; `streams` collects them. */
async function silentAgent(
  agents: TunnelServer<string>,
  agentId: string,
  router: Router,
  streams: Duplex[],
): Promise<TunnelClient> {
  const client = new TunnelClient({
    url: agents.url,
    dial: { headers: { "x-agent-id": agentId } },
    onStream: (stream) => void streams.push(stream.on("error", () => {})),
  }).start();
  clients.push(client);
  await client.ready(5000);
  await until(() => router.local.usable(agentId), 5000, `agent ${agentId} registered`);
  return client;
}

describe("before start", () => {
  test("a clustered router: no private URL nor cluster yet, and dial refuses", async () => {
    const r = new Router({
      privateApi: { auth: { secret: SECRET } },
      redis: { server: { host: "127.0.0.1", port: 1 } },
    });
    expect(r.clustered).toBe(true);
    expect(() => r.privateUrl).toThrow("router not started");
    expect(() => r.cluster).toThrow("router not started");
    expect(r.peerTunnels).toBe(0);
    await expect(r.dial("1", HTTP)).rejects.toThrow("router not started");
  });

  test("replica ids: the one given, else a random UUID each", () => {
    expect(new Router({ replicaId: "kas-0" }).replicaId).toBe("kas-0");
    const ids = [new Router({}).replicaId, new Router({}).replicaId];
    for (const id of ids)
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(ids[0]).not.toBe(ids[1]);
  });

  test("a private API without redis is single-replica, and refuses redis without one", () => {
    const r = new Router({ privateApi: { auth: { secret: SECRET } } });
    expect(r.clustered).toBe(false);
    expect(() => r.privateUrl).toThrow("router is single-replica");
    expect(() => new Router({ redis: {} })).toThrow(new TypeError("router: redis needs privateApi"));
  });
});

describe("single replica", () => {
  let started: Promise<{ router: Router; agents: TunnelServer<string> }> | undefined;
  /**
   * The router and its agent listener, started by the first test that needs them. Not in
   * `beforeAll`: there a `start` that throws would only mark the tests skipped.
   */
  const setup = () => {
    started ??= (async () => {
      const router = await new Router({
        privateApi: { auth: { secret: SECRET } },
        defaultTimeoutMs: 150,
      }).start();
      return { router, agents: await serveAgents(router) };
    })();
    return started;
  };
  afterAll(async () => {
    const s = await started?.catch(() => undefined);
    await s?.router.close(0);
    await s?.agents.close(0);
  });

  test("no private API even when one is configured; no cluster registry", async () => {
    const { router } = await setup();
    expect(() => router.privateUrl).toThrow("router is single-replica");
    expect(() => router.cluster).toThrow("router is single-replica: no cluster registry");
  });

  test("the stream goes to the dialed agent: the header's agent id is replaced by it", async () => {
    const { router, agents } = await setup();
    await headerAgent(agents, "21", router);
    const stream = await router.dial("21", { ...HTTP, agentId: "99" }, { deadline: Date.now() + 5000 });
    stream.end("x");
    expect((await readAll(stream)).toString()).toBe("21 echo\nx");
  });

  test("without a deadline a dial waits defaultTimeoutMs; a Date deadline is taken as its time", async () => {
    const { router } = await setup();
    expect(DEFAULT_DIAL_TIMEOUT_MS).toBe(10_000);
    let start = Date.now();
    const err = await router.dial("404", HTTP).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NoTunnelError);
    expect(Date.now() - start).toBeGreaterThanOrEqual(140);
    expect(Date.now() - start).toBeLessThan(DEFAULT_DIAL_TIMEOUT_MS);
    // The error says how long the dial waited.
    const waited = Number(/^no tunnel to agent 404 within (\d+) ms$/.exec((err as Error).message)?.[1]);
    expect(waited).toBeGreaterThanOrEqual(140);
    expect(waited).toBeLessThan(DEFAULT_DIAL_TIMEOUT_MS);
    start = Date.now();
    await expect(router.dial("404", HTTP, { deadline: new Date(start + 250) })).rejects.toBeInstanceOf(
      NoTunnelError,
    );
    expect(Date.now() - start).toBeGreaterThanOrEqual(240);
  });

  test("the caller's abort ends a dial with its reason, before or while it waits", async () => {
    const { router } = await setup();
    const reason = new Error("caller gone");
    await expect(router.dial("404", HTTP, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    const ctl = new AbortController();
    const waiting = router.dial("404", HTTP, { signal: ctl.signal, deadline: Date.now() + 5000 });
    setImmediate(() => ctl.abort(reason));
    await expect(waiting).rejects.toBe(reason);
  });

  test("a dial waiting when the agent connects is served", async () => {
    const { router, agents } = await setup();
    const waiting = router.dial("22", HTTP, { deadline: Date.now() + 5000 });
    await headerAgent(agents, "22");
    const stream = await waiting;
    stream.end("late");
    expect((await readAll(stream)).toString()).toBe("22 echo\nlate");
  });

  test("opener: every stream to the agent, within its own timeout or else defaultTimeoutMs", async () => {
    const { router, agents } = await setup();
    await headerAgent(agents, "23", router);
    const stream = await router.opener("23", { ...HTTP, service: "s" }, 5000)(new AbortController().signal);
    stream.end("o");
    expect((await readAll(stream)).toString()).toBe("23 s\no");
    let start = Date.now();
    await expect(router.opener("404", HTTP, 300)(new AbortController().signal)).rejects.toBeInstanceOf(
      NoTunnelError,
    );
    expect(Date.now() - start).toBeGreaterThanOrEqual(290);
    start = Date.now();
    await expect(router.opener("404", HTTP)(new AbortController().signal)).rejects.toBeInstanceOf(
      NoTunnelError,
    );
    expect(Date.now() - start).toBeLessThan(DEFAULT_DIAL_TIMEOUT_MS);
    const reason = new Error("gone");
    await expect(router.opener("404", HTTP)(AbortSignal.abort(reason))).rejects.toBe(reason);
  });

  test("register routes over a tunnel until its unregister function is called", async () => {
    const { router, agents } = await setup();
    const client = await headerAgent(agents, "24", router);
    const other = new Router({});
    await other.start();
    const unregister = other.register("24", [...agents.sessions].find((s) => s.identity === "24")!);
    expect(other.local.agentIds()).toEqual(["24"]);
    unregister();
    expect(other.local.agentIds()).toEqual([]);
    await other.close(0);
    expect(client.active).toBeDefined();
  });

  test("an agent that never answers the header: the dial ends at its deadline, or at once on the caller's abort", async () => {
    const { router, agents } = await setup();
    const streams: Duplex[] = [];
    await silentAgent(agents, "25", router, streams);
    const late = router.dial("25", HTTP, { deadline: Date.now() + 200 }).catch((e: unknown) => e);
    expect(await within(late, 5000, "the dial to end at its deadline")).toBeInstanceOf(NoTunnelError);
    expect(streams).toHaveLength(1); // the agent did get the stream, and said nothing
    const reason = new Error("caller gone");
    const ctl = new AbortController();
    const aborted = router
      .dial("25", HTTP, { signal: ctl.signal, deadline: Date.now() + 30_000 })
      .catch((e: unknown) => e);
    await until(() => streams.length === 2, 5000, "the second stream at the agent");
    ctl.abort(reason);
    expect(await within(aborted, 5000, "the dial to end on abort")).toBe(reason);
  });

  test("a dial that was served leaves nothing behind waiting for its deadline", async () => {
    // A router of its own: an earlier dial's wait must not be what holds the timer.
    const router = await new Router({}).start();
    const agents = await serveAgents(router);
    try {
      await headerAgent(agents, "26", router);
      // Only timeouts are faked: the tunnel's I/O runs as usual. A dial that left its wait armed
      // would leave that wait's timer for the deadline, a minute away.
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
      let stream: Duplex;
      try {
        stream = await router.dial("26", HTTP, { deadline: Date.now() + 60_000 });
        expect(vi.getTimerCount()).toBe(0);
      } finally {
        vi.useRealTimers();
      }
      stream.end("x");
      expect((await readAll(stream)).toString()).toBe("26 echo\nx");
    } finally {
      await router.close(0);
      await agents.close(0);
    }
  });

  test("drain and close have no private API to stop; close fails the dials still waiting", async () => {
    const r = await new Router({}).start();
    const waiting = r.dial("404", HTTP, { deadline: Date.now() + 10_000 }).catch((e: unknown) => e);
    r.drain();
    await r.close(100);
    expect(await waiting).toEqual(new Error("router closed"));
  });
});

describe("clustered", () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await RedisServer.start();
  });
  afterAll(async () => {
    await redis.close();
  });

  const replica = (name: string) => startReplica(name, redis);
  /** `use` on a Redis connection of its own, closed after. */
  const withRedis = async <T>(use: (c: Redis) => Promise<T>): Promise<T> => {
    const c = new Redis({ ...redis.connection, lazyConnect: true });
    await c.connect();
    try {
      return await use(c);
    } finally {
      c.disconnect();
    }
  };
  const entries = (agentId: string) => withRedis((c) => c.hgetall(`${PREFIX}agent:${agentId}`));
  const redisPublish = (channel: string, message: object) =>
    withRedis((c) => c.publish(channel, JSON.stringify(message)));

  test("the private URL is the advertised one when given, else where it listens", async () => {
    const port = await closedPort();
    const r = new Router({
      replicaId: "adv",
      privateApi: { host: "127.0.0.1", port, auth: { secret: SECRET }, advertiseUrl: "wss://kas-0.kas:8155" },
      redis: { server: redis.connection, keyPrefix: `${PREFIX}adv:`, ...FAST },
    });
    await r.start();
    try {
      expect(r.privateUrl).toBe("wss://kas-0.kas:8155");
      expect(r.cluster.url).toBe("wss://kas-0.kas:8155");
      // It listens on the port given.
      await expect(dial(`ws://127.0.0.1:${port}`)).rejects.toMatchObject({ status: 401 });
    } finally {
      await r.close(0);
    }
  });

  test("agents registered before start are published; tunnels coming and going hold and release", async () => {
    const r = new Router({
      replicaId: "early",
      privateApi: { host: "127.0.0.1", auth: { secret: SECRET } },
      redis: { server: redis.connection, keyPrefix: PREFIX, ...FAST },
    });
    const agents = await serveAgents(r);
    try {
      await headerAgent(agents, "31", r);
      expect(r.local.agentIds()).toEqual(["31"]);
      await r.start();
      expect(r.cluster.held).toBe(1);
      await until(async () => "early" in (await entries("31")), 5000, "agent 31's entry");
      const late = await headerAgent(agents, "32");
      await until(() => r.cluster.held === 2, 5000, "agent 32 held");
      await late.close(0);
      await until(() => r.cluster.held === 1, 5000, "agent 32 released");
    } finally {
      await r.close(0);
      await agents.close(0);
    }
  });

  test("Redis failures go to onError", async () => {
    const errors: Error[] = [];
    const r = new Router({
      privateApi: { host: "127.0.0.1", auth: { secret: SECRET } },
      redis: { server: { host: "127.0.0.1", port: await closedPort() }, ...FAST },
      onError: (err) => errors.push(err),
    });
    await r.start();
    try {
      await until(() => errors.length > 0, 5000, "a Redis error");
      expect(errors[0]!.message).toMatch(/ECONNREFUSED/);
    } finally {
      await r.close(0);
    }
  });

  test("a start that fails (unreadable password file) leaves no private API listening", async () => {
    const port = await closedPort();
    const r = new Router({
      privateApi: { host: "127.0.0.1", port, auth: { secret: SECRET } },
      redis: { server: redis.connection, passwordFile: "/nonexistent/redis-password" },
    });
    await expect(r.start()).rejects.toThrow(/ENOENT/);
    await expect(dial(`ws://127.0.0.1:${port}`)).rejects.toMatchObject({
      code: "NETWORK",
      cause: { code: "ECONNREFUSED" },
    });
  });

  test("a dial waiting when the registry listens again looks again, and finds what it missed", async () => {
    const b = await replica("lb");
    // a publishes agent 51 on connecting, by republishing: no announcement, b hears nothing.
    const a = new Router({
      replicaId: "la",
      privateApi: { host: "127.0.0.1", auth: { secret: SECRET } },
      redis: { server: redis.connection, keyPrefix: PREFIX, ...FAST },
    });
    const agents = await serveAgents(a);
    try {
      await headerAgent(agents, "51", a);
      const waiting = b.router.dial("51", HTTP, { deadline: Date.now() + 10_000 });
      await b.router.cluster.lookup("51"); // the dial's own lookup went out before this is answered
      await a.start();
      await until(async () => (await b.router.cluster.lookup("51")).length === 1, 5000, "la's entry");
      b.router.cluster.emit("listening"); // what b's registry says once it hears announcements again
      const stream = await waiting;
      stream.end("found");
      expect((await readAll(stream)).toString()).toBe("51 echo\nfound");
    } finally {
      await a.close(0);
      await agents.close(0);
      await b.close();
    }
  });

  test("the only holder refuses our credentials: PeerRejectedError at once; another holder saying it has no tunnel: wait", async () => {
    const [a, b] = await Promise.all([replica("ra"), replica("rb")]);
    const c = await startReplica("rc", redis, { auth: { secret: Buffer.alloc(32, 7) } });
    const agent = startAgent(c, "52");
    clients.push(agent);
    await agent.ready(5000);
    try {
      await until(async () => (await b.router.cluster.lookup("52")).length === 1, 5000, "rc's entry");
      // Waiting would only turn the configuration error into a timeout.
      const refused = b.router.dial("52", HTTP, { deadline: Date.now() + 30_000 }).catch((e: unknown) => e);
      expect(await within(refused, 5000, "the refusal")).toMatchObject({
        name: "PeerRejectedError",
        code: "PEER_REJECTED",
        status: 401,
      });
      // ra claims the agent too (a stale entry): it answers "no tunnel here".
      const c2 = new Redis({ ...redis.connection, lazyConnect: true });
      await c2.connect();
      await c2.hset(`${PREFIX}agent:52`, "ra", Date.now() + 60_000);
      c2.disconnect();
      const err = await ask(b.router, "52", "x", 500).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NoTunnelError);
    } finally {
      await Promise.all([a.close(), b.close(), c.close()]);
    }
  });

  test("close: waiting dials fail, the entries go (or stay with unpublish: false), peer tunnels dropped", async () => {
    const [a, b] = await Promise.all([replica("ca"), replica("cb")]);
    const agent = startAgent(a, "41");
    clients.push(agent);
    await agent.ready(5000);
    try {
      await until(async () => (await b.router.cluster.lookup("41")).length === 1, 5000, "a's entry");
      expect(await ask(b.router, "41", "hi", 10_000)).toBe("41\nhi");
      expect(b.router.peerTunnels).toBe(1);
      const waiting = b.router.dial("404", HTTP, { deadline: Date.now() + 10_000 }).catch((e: unknown) => e);
      // The dial's own lookup went out before this is answered; the close's writes go after it.
      await b.router.cluster.lookup("404");
      await b.router.close(0);
      expect(await waiting).toEqual(new Error("router closed"));
      expect(b.router.peerTunnels).toBe(0);
      await a.router.close(0, { unpublish: false });
      expect(Object.keys(await entries("41"))).toEqual(["ca"]);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  test("close: a dial looking again when the router closes fails as a waiting one does, and so does a dial after it", async () => {
    const b = await replica("cw");
    try {
      const looking = b.router.dial("404", HTTP, { deadline: Date.now() + 10_000 }).catch((e: unknown) => e);
      // What b's registry says when its subscription is confirmed, late on a loaded machine: the
      // dial is to look again, but its first lookup is still in flight.
      b.router.cluster.emit("listening");
      await b.router.cluster.lookup("404"); // answered before the dial's: that one is still in flight
      await b.router.close(0);
      expect(await looking).toEqual(new Error("router closed"));
      await expect(b.router.dial("1", HTTP)).rejects.toEqual(new Error("router closed"));
    } finally {
      await b.close();
    }
  });

  test("close: a dial whose Redis lookup is still in flight fails with 'router closed', not the registry's error", async () => {
    // cl reaches Redis through a relay that can hold Redis' answers back.
    let holding = false;
    const relay = createServer((client) => {
      const upstream = connect(redis.connection);
      client.pipe(upstream);
      upstream.on("data", (chunk: Buffer) => void (holding || client.write(chunk)));
      const cut = () => {
        client.destroy();
        upstream.destroy();
      };
      for (const s of [client, upstream]) s.on("error", cut).on("close", cut);
    });
    await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
    const { port } = relay.address() as AddressInfo;
    const b = await startReplica("cl", redis, { redis: { server: { host: "127.0.0.1", port } } });
    const lookup = vi.spyOn(b.router.cluster, "lookup");
    try {
      holding = true;
      const looking = b.router.dial("404", HTTP, { deadline: Date.now() + 10_000 }).catch((e: unknown) => e);
      await until(() => lookup.mock.calls.length > 0, 5000, "the dial's lookup");
      await b.router.close(0, { unpublish: false }); // drops the connection the lookup waits on
      const err = (await within(looking, 5000, "the dial to fail")) as Error;
      expect(err.message).toBe("router closed");
      expect((err.cause as Error).name).toBe("RegistryUnavailableError");
    } finally {
      await b.close();
      relay.close();
    }
  });

  test("close unpublishes by default", async () => {
    const a = await replica("ua");
    const agent = startAgent(a, "42");
    clients.push(agent);
    await agent.ready(5000);
    try {
      await until(async () => "ua" in (await entries("42")), 5000, "ua's entry");
      await a.router.close(500);
      expect(await entries("42")).toEqual({});
    } finally {
      await a.close();
    }
  });

  test("drain: the private API takes no new peer and tells its tunnels to go away; streams under way carry on", async () => {
    const [a, b] = await Promise.all([replica("da"), replica("db")]);
    const agent = startAgent(a, "43");
    clients.push(agent);
    await agent.ready(5000);
    try {
      await until(async () => (await b.router.cluster.lookup("43")).length === 1, 5000, "da's entry");
      const stream = await b.router.dial("43", HTTP, { deadline: Date.now() + 10_000 });
      a.router.drain();
      await expect(dial(a.router.privateUrl)).rejects.toMatchObject({
        code: "NETWORK",
        cause: { code: "ECONNREFUSED" },
      });
      // b's tunnel to a got GoAway: the stream under way still works.
      stream.end("under way");
      expect((await readAll(stream)).toString()).toBe("43\nunder way");
      // a new one cannot reach a any more.
      await expect(ask(b.router, "43", "new", 300)).rejects.toBeInstanceOf(NoTunnelError);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  test("limits given for the private API reach its listener (here: one connection at a time)", async () => {
    const limited: string[] = [];
    const r = new Router({
      privateApi: {
        host: "127.0.0.1",
        auth: { secret: SECRET },
        limits: { maxConnections: 1, onLimit: (limit) => limited.push(limit) },
      },
      redis: { server: redis.connection, keyPrefix: `${PREFIX}lim:`, ...FAST },
    });
    await r.start();
    const { hostname, port } = new URL(r.privateUrl);
    const sockets: Socket[] = [];
    try {
      const first = connect(Number(port), hostname).on("error", () => {});
      sockets.push(first);
      await once(first, "connect");
      sockets.push(connect(Number(port), hostname).on("error", () => {}));
      await until(() => limited.length > 0, 5000, "the second connection to be dropped");
      expect(limited).toEqual(["max connections"]);
    } finally {
      for (const socket of sockets) socket.destroy();
      await r.close(0);
    }
  });

  test("without onError, Redis failures still reach the registry's other listeners", async () => {
    const r = new Router({
      privateApi: { host: "127.0.0.1", auth: { secret: SECRET } },
      redis: { server: { host: "127.0.0.1", port: await closedPort() }, ...FAST },
    });
    await r.start();
    try {
      const errors: Error[] = [];
      r.cluster.on("error", (err) => errors.push(err));
      await until(() => errors.length > 0, 5000, "a Redis error");
      expect(errors[0]!.message).toMatch(/ECONNREFUSED/);
    } finally {
      await r.close(0);
    }
  });

  test("a waiting dial that hears a replica announce the agent goes to that replica, without asking Redis again", async () => {
    const a = await replica("na");
    // nb keeps its entries under another prefix: its lookups never find na's, and it does not
    // hear na's announcements. Only the announcement emitted below tells it where agent 61 is.
    const b = await startReplica("nb", redis, { redis: { keyPrefix: `${PREFIX}nb:` } });
    const agent = startAgent(a, "61");
    clients.push(agent);
    await agent.ready(5000);
    try {
      await until(() => a.router.local.usable("61"), 5000, "agent 61 at na");
      expect(await b.router.cluster.lookup("61")).toEqual([]);
      // nb hears announcements on its channel: no late `listening` will send the dial looking again.
      const subscribed = once(b.router.cluster, "announce");
      await redisPublish(`${PREFIX}nb:announce`, { agentId: "0", replicaId: "x", url: "http://127.0.0.1:1" });
      await within(subscribed, 5000, "nb's subscription");
      const lookup = vi.spyOn(b.router.cluster, "lookup");
      const waiting = ask(b.router, "61", "announced", 10_000);
      // The dial sends its lookup once it has found no tunnel here, just after the first of these
      // two: the second is answered after the dial's, so the dial has its empty answer.
      await b.router.cluster.lookup("61");
      await b.router.cluster.lookup("61");
      const lookups = lookup.mock.calls.length; // these two and the dial's first pass
      b.router.cluster.emit("announce", "61", { replicaId: "na", url: a.router.privateUrl });
      expect(await waiting).toBe("61\nannounced");
      expect(lookup.mock.calls.length).toBe(lookups); // the announced replica was enough
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  test("an announcement heard after something else woke the dial, before its next pass, is not lost", async () => {
    const a = await replica("wa");
    // As above: only the announcement emitted below tells wb where agent 65 is.
    const b = await startReplica("wb", redis, { redis: { keyPrefix: `${PREFIX}wb:` } });
    const agent = startAgent(a, "65");
    clients.push(agent);
    await agent.ready(5000);
    try {
      await until(() => a.router.local.usable("65"), 5000, "agent 65 at wa");
      const waiting = ask(b.router, "65", "heard", 10_000);
      // What wb's registry says when its subscription is confirmed, late on a loaded machine: the
      // dial is to look again, but its first lookup is still in flight.
      b.router.cluster.emit("listening");
      await b.router.cluster.lookup("65"); // answered before the dial's: that one is still in flight
      b.router.cluster.emit("announce", "65", { replicaId: "wa", url: a.router.privateUrl });
      expect(await waiting).toBe("65\nheard");
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  test("through a peer: the agent's own refusal comes back at once; an agent that never answers ends the dial at its deadline", async () => {
    const [a, b] = await Promise.all([replica("pa"), replica("pb")]);
    const agent = startAgent(a, "62"); // serves the HTTP kind only
    clients.push(agent);
    await agent.ready(5000);
    await silentAgent(a.agents, "63", a.router, []);
    try {
      for (const id of ["62", "63"])
        await until(
          async () => (await b.router.cluster.lookup(id)).length === 1,
          5000,
          `pa's entry for ${id}`,
        );
      const grpc = { kind: Kind.KIND_GRPC, service: "x" };
      const refused = b.router.dial("62", grpc, { deadline: Date.now() + 30_000 }).catch((e: unknown) => e);
      expect(await within(refused, 5000, "the agent's refusal")).toMatchObject({
        name: "StreamRejectedError",
        code: RejectCode.REJECT_CODE_UNKNOWN_KIND,
      });
      const silent = b.router.dial("63", HTTP, { deadline: Date.now() + 300 }).catch((e: unknown) => e);
      expect(await within(silent, 5000, "the dial to end at its deadline")).toBeInstanceOf(NoTunnelError);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  test("close(graceMs): a stream forwarded through this replica finishes within the grace; then nothing listens", async () => {
    const [a, b] = await Promise.all([replica("ga"), replica("gb")]);
    const agent = startAgent(a, "45");
    clients.push(agent);
    await agent.ready(5000);
    try {
      await until(async () => (await b.router.cluster.lookup("45")).length === 1, 5000, "ga's entry");
      const stream = await b.router.dial("45", HTTP, { deadline: Date.now() + 10_000 });
      const url = a.router.privateUrl;
      const closing = a.router.close(30_000);
      // Unpublished: the close has moved on to the private API, which now lets the stream finish.
      await until(async () => !("ga" in (await entries("45"))), 5000, "ga's entry to go");
      stream.end("in grace");
      expect((await readAll(stream)).toString()).toBe("45\nin grace");
      await within(closing, 5000, "the close, once the stream finished");
      await expect(dial(url)).rejects.toMatchObject({ code: "NETWORK", cause: { code: "ECONNREFUSED" } });
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  test("close(0) cuts the streams forwarded through this replica at once", async () => {
    const [a, b] = await Promise.all([replica("za"), replica("zb")]);
    const agent = startAgent(a, "44");
    clients.push(agent);
    await agent.ready(5000);
    try {
      await until(async () => (await b.router.cluster.lookup("44")).length === 1, 5000, "za's entry");
      const stream = await b.router.dial("44", HTTP, { deadline: Date.now() + 10_000 });
      stream.on("error", () => {});
      const closed = new Promise((resolve) => stream.once("close", resolve));
      await a.router.close(0);
      await closed; // no end was sent: only the cut closes it
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});
