// The record of logged-out dashboard sessions: bounded in memory without ever letting a revoked
// session back in, and in a real redis-server, where each entry lives exactly as long as its cookie.
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { InProcessBroadcast } from "../../../cmd/kas/shared/broadcast.ts";
import { RedisRevocations } from "../../../modules/dashboard/kas/redis-revocations.ts";
import { MemoryRevocations, type SessionRecord } from "../../../modules/dashboard/kas/revocations.ts";
import { RedisServer } from "../../support/redis-server.ts";

const TTL = 60_000;
const sessionAt = (issuedAtMs: number, id = `s-${issuedAtMs}`): SessionRecord => ({
  id,
  issuedAtMs,
  expiresAtMs: issuedAtMs + TTL,
});

describe("in memory", () => {
  test("a revoked session is refused until its cookie expires; the others are not", async () => {
    let now = 1_000;
    const record = new MemoryRevocations(4, () => now);
    const told: string[] = [];
    record.onRevoked((id) => told.push(id));
    const out = sessionAt(1_000);
    await record.revoke(out);
    expect(await record.isRevoked(out)).toBe(true);
    expect(await record.isRevoked(sessionAt(1_000, "another"))).toBe(false);
    expect(told).toEqual([out.id]);
    // An expired session is not even recorded: its cookie is refused for that alone.
    now = 1_000 + TTL;
    await record.revoke(sessionAt(500));
    expect(record.size).toBe(1);
  });

  test("at its bound, expired sessions are forgotten first, and nothing else is refused for it", async () => {
    let now = 0;
    const record = new MemoryRevocations(4, () => now);
    for (const at of [0, 1, 2, 3]) record.record(sessionAt(at));
    now = 2 + TTL; // the sessions issued at 0, 1 and 2 have expired
    const fresh = sessionAt(now);
    record.record(fresh);
    expect(record.size).toBe(2);
    expect(record.has(fresh)).toBe(true);
    expect(record.has(sessionAt(3))).toBe(true);
    expect(record.has(sessionAt(4, "never revoked"))).toBe(false);
  });

  test("full of live sessions, it forgets the older half but goes on refusing them, and what is older", () => {
    const record = new MemoryRevocations(4, () => 0);
    const revoked = [10, 20, 30, 40, 50, 60, 70].map((at) => sessionAt(at));
    for (const session of revoked) record.record(session);
    expect(record.size).toBeLessThanOrEqual(4);
    for (const session of revoked) expect(record.has(session)).toBe(true);
    // The price of the bound: sessions as old as the forgotten ones are refused too...
    expect(record.has(sessionAt(15, "not revoked, older"))).toBe(true);
    // ...and only those.
    expect(record.has(sessionAt(65, "not revoked, newer"))).toBe(false);
  });
});

describe("in Redis", () => {
  let redis: RedisServer;
  let client: Redis;
  beforeAll(async () => {
    redis = await RedisServer.start();
    client = new Redis({ ...redis.connection, lazyConnect: true });
    await client.connect();
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.close();
  });

  test("each revoked session is a key that expires with the session's cookie", async () => {
    const warnings: string[] = [];
    const broadcast = new InProcessBroadcast();
    const log = { warn: (_: object, msg: string) => warnings.push(msg) };
    const here = new RedisRevocations({ client, keyPrefix: "t1:" }, broadcast, log);
    const elsewhere = new RedisRevocations({ client, keyPrefix: "t1:" }, new InProcessBroadcast(), log);
    try {
      const session = sessionAt(Date.now(), "a-session-id");
      await here.revoke(session);
      const key = "t1:dashboard:revoked_session:a-session-id";
      expect(await client.pexpiretime(key)).toBe(session.expiresAtMs);
      expect(await elsewhere.isRevoked(session)).toBe(true); // from Redis alone
      expect(await elsewhere.isRevoked(sessionAt(Date.now(), "another"))).toBe(false);

      // What the channel says is checked before it is believed.
      await broadcast.publish("dashboard_session_revoked", '{"id": 42}');
      expect(warnings).toEqual(["ignored a malformed dashboard session revocation"]);
    } finally {
      here.close();
      elsewhere.close();
    }
  });
});
