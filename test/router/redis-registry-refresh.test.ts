// When RedisRegistry writes its entries again, on a faked clock (Date and the refresh tick's
// setInterval; the Redis I/O stays real): the liveness key each refresh period, each agent entry
// first somewhere in its period (spread) and then a period later give or take 10 %; nothing while
// the connection is not up.
import { once } from "node:events";
import { type AddressInfo, createServer, type Socket } from "node:net";
import { Redis } from "ioredis";
import { afterEach, expect, test, vi } from "vitest";
import { RedisRegistry } from "../../lib/router/index.ts";
import { resolveRedisOptions } from "../../lib/router/redis-options.ts";
import { until } from "../support/until.ts";
import { prefix, registryFixture, started } from "./redis-registry-support.ts";

const f = registryFixture();

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

test("liveness every refresh period; an agent first at a random point of its period, then a period on ±10 %", async () => {
  const keyPrefix = prefix();
  const admin = f.admin();
  const commands = f.client();
  vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "Date"] });
  // Math.random() = 0.75: the first refresh 3/4 into the 4 s period, the next 1.05 periods later.
  vi.spyOn(Math, "random").mockReturnValue(0.75);
  // The tick: a quarter of the liveness refresh, 250 ms.
  const a = await started(
    f.registry({
      replicaId: "a",
      keyPrefix,
      commands,
      livenessTtlMs: 60_000,
      livenessRefreshMs: 1000,
      agentTtlMs: 60_000,
      agentRefreshMs: 4000,
    }),
  );
  const replicaKey = `${keyPrefix}replica:a`;
  const agentKey = `${keyPrefix}agent:1`;
  a.hold("1");
  await commands.ping(); // the registry's commands are answered in order: the hold is written
  expect(await admin.hexists(agentKey, "a")).toBe(1);
  const liveness: number[] = [];
  const agent: number[] = [];
  await admin.del(replicaKey, agentKey);
  for (let t = 250; t <= 8000; t += 250) {
    vi.advanceTimersByTime(250);
    await commands.ping(); // whatever this tick wrote is in Redis now
    if ((await admin.exists(replicaKey)) === 1) liveness.push(t);
    if ((await admin.hexists(agentKey, "a")) === 1) agent.push(t);
    await admin.del(replicaKey, agentKey);
  }
  await a.close({ unpublish: false });
  expect(liveness).toEqual([1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000]);
  // 3000 = 0.75 x 4000; then 3000 + 4000 x (0.9 + 0.2 x 0.75) = 7200, written on the tick at 7250.
  expect(agent).toEqual([3000, 7250]);
});

test("ticks while the connection is not up send nothing (the router's clients would fail each command)", async () => {
  // Accepts and never answers: ioredis connects and waits for its ready check forever.
  const sockets: Socket[] = [];
  const silent = createServer((s) => sockets.push(s)).listen(0, "127.0.0.1");
  await once(silent, "listening");
  const { port } = silent.address() as AddressInfo;
  const client = async () =>
    new Redis(await resolveRedisOptions({ server: { host: "127.0.0.1", port }, commandTimeoutMs: 60_000 }));
  vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
  const a = new RedisRegistry({
    commands: await client(),
    subscriber: await client(),
    replicaId: "a",
    url: "wss://a",
    livenessTtlMs: 1000,
  });
  const errors: Error[] = [];
  a.on("error", (e) => errors.push(e));
  a.hold("1");
  a.describe("1", "one");
  void a.start();
  try {
    await until(() => sockets.length === 2, 5000, "both connections");
    vi.advanceTimersByTime(1000); // a dozen ticks, with everything still to be written
    await new Promise((r) => setImmediate(r));
    expect(a.connected).toBe(false);
    expect(errors).toEqual([]);
  } finally {
    await a.close();
    for (const s of sockets) s.destroy();
    silent.close();
  }
});
