import { readFile } from "node:fs/promises";
import { type ConnectionOptions, rootCertificates } from "node:tls";
import { Redis, type RedisOptions } from "ioredis";

export interface RedisTlsOptions {
  /** PEM file with the CA(s) that signed the server certificate; added to the system roots. */
  caFile?: string;
  /** Client certificate and key, PEM files, for servers that require mutual TLS. */
  certFile?: string;
  keyFile?: string;
  serverName?: string;
}

export interface RedisConnectionOptions {
  /** A single server: `host`/`port`, or `path` for a unix socket. Ignored with `sentinel`. */
  server?: { host?: string; port?: number; path?: string };
  /** Redis Sentinel: the master group name and the sentinels to ask for it. */
  sentinel?: {
    masterName: string;
    addresses: ReadonlyArray<{ host: string; port: number }>;
    username?: string;
    /** Read once, at start; surrounding whitespace ignored. */
    passwordFile?: string;
  };
  /** TLS to the server (and to the sentinels when `sentinel` is set). */
  tls?: RedisTlsOptions | boolean;
  username?: string;
  /** Read once, at start; surrounding whitespace ignored. Never logged. */
  passwordFile?: string;
  /** Database index. Default 0. */
  db?: number;
  /** Default 5 s. */
  connectTimeoutMs?: number;
  /** A command with no reply by then fails (the router then fails fast). Default 1 s. */
  commandTimeoutMs?: number;
  /** Reconnect attempts back off up to this. Default 1 s. */
  reconnectMaxDelayMs?: number;
  /** Anything else, passed to ioredis as is (wins over the fields above). */
  ioredis?: RedisOptions;
}

/**
 * ioredis settings for the router: no offline queue and a short command timeout, so that with
 * Redis down a command fails at once instead of waiting for a reconnect that may never come.
 */
export async function resolveRedisOptions(o: RedisConnectionOptions): Promise<RedisOptions> {
  const tls = o.tls ? await resolveTls(o.tls === true ? {} : o.tls) : undefined;
  const maxDelay = o.reconnectMaxDelayMs ?? 1000;
  const base: RedisOptions = {
    enableOfflineQueue: false,
    commandTimeout: o.commandTimeoutMs ?? 1000,
    connectTimeout: o.connectTimeoutMs ?? 5000,
    maxRetriesPerRequest: 0,
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 10), maxDelay),
    lazyConnect: true,
    db: o.db ?? 0,
    ...(o.username !== undefined && { username: o.username }),
    ...(o.passwordFile !== undefined && { password: await readSecret(o.passwordFile) }),
    ...(tls && { tls }),
  };
  if (o.sentinel) {
    const s = o.sentinel;
    Object.assign(base, {
      name: s.masterName,
      sentinels: s.addresses.map((a) => ({ host: a.host, port: a.port })),
      ...(s.username !== undefined && { sentinelUsername: s.username }),
      ...(s.passwordFile !== undefined && { sentinelPassword: await readSecret(s.passwordFile) }),
      ...(tls && { enableTLSForSentinelMode: true, sentinelTLS: tls }),
    } satisfies RedisOptions);
  } else {
    Object.assign(base, o.server ?? {});
  }
  return { ...base, ...o.ioredis };
}

/** Two connections: commands, and pub/sub (a subscribed connection can issue nothing else). */
export async function createRedisClients(
  o: RedisConnectionOptions,
): Promise<{ commands: Redis; subscriber: Redis }> {
  const options = await resolveRedisOptions(o);
  return {
    commands: new Redis(options),
    // The registry subscribes on every 'ready' itself: a SUBSCRIBE queued while Redis is down
    // would be dropped (and never retried) when the first connection attempt fails.
    subscriber: new Redis({ ...options, autoResubscribe: false }),
  };
}

async function readSecret(path: string): Promise<string> {
  return (await readFile(path, "utf8")).trim();
}

async function resolveTls(t: RedisTlsOptions): Promise<ConnectionOptions> {
  return {
    ...(t.caFile !== undefined && { ca: [...rootCertificates, await readFile(t.caFile, "utf8")] }),
    ...(t.certFile !== undefined && { cert: await readFile(t.certFile) }),
    ...(t.keyFile !== undefined && { key: await readFile(t.keyFile) }),
    ...(t.serverName !== undefined && { servername: t.serverName }),
  };
}
