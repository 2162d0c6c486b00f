// The ioredis settings the router derives from its Redis options, checked as data: defaults that
// make a command fail fast while Redis is down, secrets read from files, TLS and Sentinel fields.
// (That these settings connect for real is redis-connection.test.ts's job.)
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { rootCertificates } from "node:tls";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createRedisClients, resolveRedisOptions } from "../../lib/router/index.ts";

let dir: string;
const file = (name: string) => join(dir, name);
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "redis-options-"));
  await Promise.all([
    writeFile(file("password"), "  redis-pass\n"),
    writeFile(file("sentinel-password"), "\tsentinel-pass \n"),
    writeFile(file("ca.crt"), "CA PEM"),
    writeFile(file("client.crt"), "CERT PEM"),
    writeFile(file("client.key"), "KEY PEM"),
  ]);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("resolveRedisOptions", () => {
  test("defaults: no offline queue, no retries per request, 1 s commands, 5 s connect, db 0, lazy", async () => {
    const o = await resolveRedisOptions({});
    const { retryStrategy, ...rest } = o;
    expect(rest).toEqual({
      enableOfflineQueue: false,
      commandTimeout: 1000,
      connectTimeout: 5000,
      maxRetriesPerRequest: 0,
      lazyConnect: true,
      db: 0,
    });
    expect(typeof retryStrategy).toBe("function");
  });

  test("reconnects back off exponentially from 100 ms, capped at 1 s by default", async () => {
    const { retryStrategy } = await resolveRedisOptions({});
    expect([1, 2, 3, 4, 5, 20].map((n) => retryStrategy!(n))).toEqual([100, 200, 400, 800, 1000, 1000]);
  });

  test("the back-off cap is reconnectMaxDelayMs; the exponent stops growing at 10", async () => {
    const { retryStrategy } = await resolveRedisOptions({ reconnectMaxDelayMs: 100_000 });
    expect([0, 1, 9, 10, 11, 50].map((n) => retryStrategy!(n))).toEqual([
      50, 100, 25_600, 51_200, 51_200, 51_200,
    ]);
  });

  test("timeouts, db, username and server address are taken over", async () => {
    const o = await resolveRedisOptions({
      server: { host: "redis.example", port: 6380 },
      commandTimeoutMs: 250,
      connectTimeoutMs: 750,
      db: 3,
      username: "kas",
    });
    expect(o).toMatchObject({
      host: "redis.example",
      port: 6380,
      commandTimeout: 250,
      connectTimeout: 750,
      db: 3,
      username: "kas",
    });
    expect(o).not.toHaveProperty("password");
    expect(o).not.toHaveProperty("tls");
    expect(o).not.toHaveProperty("sentinels");
  });

  test("a unix socket path is taken over", async () => {
    expect(await resolveRedisOptions({ server: { path: "/run/redis.sock" } })).toMatchObject({
      path: "/run/redis.sock",
    });
  });

  test("the password is read from its file, surrounding whitespace dropped; no username unless given", async () => {
    const o = await resolveRedisOptions({ passwordFile: file("password") });
    expect(o.password).toBe("redis-pass");
    expect(o).not.toHaveProperty("username");
  });

  test("an unreadable password file fails, naming the file", async () => {
    await expect(resolveRedisOptions({ passwordFile: file("missing") })).rejects.toThrow(/missing/);
  });

  test("tls: true means TLS with the system roots and no other settings", async () => {
    expect((await resolveRedisOptions({ tls: true })).tls).toEqual({});
    expect(await resolveRedisOptions({ tls: false })).not.toHaveProperty("tls");
  });

  test("a CA file is added to the system roots; client certificate, key and server name are taken over", async () => {
    const { tls } = await resolveRedisOptions({
      tls: {
        caFile: file("ca.crt"),
        certFile: file("client.crt"),
        keyFile: file("client.key"),
        serverName: "redis.internal",
      },
    });
    expect(tls).toEqual({
      ca: [...rootCertificates, "CA PEM"],
      cert: Buffer.from("CERT PEM"),
      key: Buffer.from("KEY PEM"),
      servername: "redis.internal",
    });
  });

  test("each TLS field alone sets only itself", async () => {
    expect((await resolveRedisOptions({ tls: { serverName: "n" } })).tls).toEqual({ servername: "n" });
    expect((await resolveRedisOptions({ tls: { certFile: file("client.crt") } })).tls).toEqual({
      cert: Buffer.from("CERT PEM"),
    });
    expect((await resolveRedisOptions({ tls: { keyFile: file("client.key") } })).tls).toEqual({
      key: Buffer.from("KEY PEM"),
    });
  });

  test("Sentinel: master name, sentinels (only host and port), the server address ignored", async () => {
    const o = await resolveRedisOptions({
      server: { host: "ignored", port: 1 },
      sentinel: {
        masterName: "kas",
        addresses: [
          { host: "s1", port: 26379 },
          { host: "s2", port: 26380, extra: true } as { host: string; port: number },
        ],
      },
    });
    expect(o.name).toBe("kas");
    expect(o.sentinels).toEqual([
      { host: "s1", port: 26379 },
      { host: "s2", port: 26380 },
    ]);
    expect(o).not.toHaveProperty("host");
    expect(o).not.toHaveProperty("port");
    expect(o).not.toHaveProperty("sentinelUsername");
    expect(o).not.toHaveProperty("sentinelPassword");
    expect(o).not.toHaveProperty("enableTLSForSentinelMode");
    expect(o).not.toHaveProperty("sentinelTLS");
  });

  test("Sentinel with its own credentials (password from its file) and TLS to the sentinels too", async () => {
    const o = await resolveRedisOptions({
      sentinel: {
        masterName: "kas",
        addresses: [{ host: "s1", port: 26379 }],
        username: "watcher",
        passwordFile: file("sentinel-password"),
      },
      tls: { serverName: "redis.internal" },
    });
    expect(o).toMatchObject({
      sentinelUsername: "watcher",
      sentinelPassword: "sentinel-pass",
      enableTLSForSentinelMode: true,
      sentinelTLS: { servername: "redis.internal" },
      tls: { servername: "redis.internal" },
    });
  });

  test("ioredis options win over the fields above", async () => {
    const o = await resolveRedisOptions({
      server: { host: "a" },
      db: 2,
      ioredis: { host: "b", enableOfflineQueue: true, keepAlive: 1000 },
    });
    expect(o).toMatchObject({ host: "b", db: 2, enableOfflineQueue: true, keepAlive: 1000 });
  });
});

describe("createRedisClients", () => {
  test("two lazy clients with the same settings; the subscriber does not resubscribe by itself", async () => {
    const { commands, subscriber } = await createRedisClients({
      server: { host: "127.0.0.1", port: 1 },
      db: 4,
      commandTimeoutMs: 300,
    });
    try {
      expect(commands).not.toBe(subscriber);
      for (const c of [commands, subscriber]) {
        expect(c.status).toBe("wait"); // lazyConnect: nothing dialed yet
        expect(c.options).toMatchObject({
          host: "127.0.0.1",
          port: 1,
          db: 4,
          commandTimeout: 300,
          enableOfflineQueue: false,
        });
      }
      expect(commands.options.autoResubscribe).toBe(true);
      expect(subscriber.options.autoResubscribe).toBe(false);
    } finally {
      commands.disconnect();
      subscriber.disconnect();
    }
  });

  test("fails when a secret cannot be read", async () => {
    await expect(createRedisClients({ passwordFile: file("missing") })).rejects.toThrow(/ENOENT/);
  });
});
