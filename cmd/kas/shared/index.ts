// What kas's modules share besides the router: Redis for their own state, and broadcasts.
import { createRedisClients } from "../../../lib/router/index.ts";
import type { Broadcast, KasRedis } from "../../../modules/runtime/index.ts";
import type { KasConfig } from "../config/index.ts";
import type { Logger } from "../observability/index.ts";
import { redisConnection } from "../routing/index.ts";
import { InProcessBroadcast, RedisBroadcast } from "./broadcast.ts";

export interface KasShared {
  broadcast: Broadcast;
  /** Absent in single-replica mode. */
  redis?: KasRedis;
  close(): Promise<void>;
}

/** With Redis configured: two connections of the modules' own (commands, pub/sub); without: the process. */
export async function openKasShared(config: KasConfig, log: Logger): Promise<KasShared> {
  const connection = redisConnection(config.redis);
  if (connection === undefined) return { broadcast: new InProcessBroadcast(), close: async () => {} };
  const { commands, subscriber } = await createRedisClients({
    ...connection,
    connectTimeoutMs: config.redis.dialTimeoutMs,
  });
  // Outages are the router's to report (it has a readiness check); these connections retry quietly.
  for (const client of [commands, subscriber]) {
    client.on("error", (err: Error) => log.debug({ err: err.message }, "redis (modules)"));
  }
  // The clients are made with lazyConnect (as the router's): connect them, or every command fails
  // ("Stream isn't writeable": no offline queue) and nothing is ever subscribed. They reconnect by
  // themselves after a failed first attempt.
  subscriber.connect().catch(() => {});
  await commands.connect().catch(() => {});
  const keyPrefix = `${config.redis.keyPrefix}:`;
  return {
    broadcast: new RedisBroadcast(commands, subscriber, `${keyPrefix}broadcast:`),
    redis: { client: commands, keyPrefix },
    async close() {
      commands.disconnect();
      subscriber.disconnect();
    },
  };
}
