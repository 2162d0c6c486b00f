// The `action_cable` kas module: off unless action_cable.redis_url is set; then every cluster view
// event is broadcast to ActionCable's `cluster_agent:<agent id>` (see actioncable.ts).
import { readFile } from "node:fs/promises";
import { Redis } from "ioredis";
import { Counter } from "prom-client";
import { ConfigError } from "../../../tool/config/errors.ts";
import { type KasModuleFactory, Phase } from "../../runtime/index.ts";
import type { ViewsHub } from "../views.ts";
import { ActionCableBroadcaster } from "./actioncable.ts";
import type { ActionCableKasConfig } from "./actioncable-config.ts";

/** How long a replica's claim on an event stands: far longer than the fan-out between replicas. */
const CLAIM_TTL_MS = 10_000;

/**
 * `hubOf` is asked when the module starts (after the capabilities, so the cluster views module has
 * handed out its hub by then).
 */
export function actionCableModule(
  config: ActionCableKasConfig,
  hubOf: () => ViewsHub | undefined,
): KasModuleFactory {
  return {
    name: "action_cable",
    phase: Phase.front,
    create({ log, registry, redis: kasRedis }) {
      const { redisUrl } = config;
      if (redisUrl === undefined) return { name: "action_cable" };
      const results = new Counter({
        name: "kas_cluster_views_actioncable_broadcasts_total",
        help: "Cluster view events for ActionCable, by result (published; elsewhere: another replica did; dropped: too many pending; failed).",
        labelNames: ["result"],
        registers: [registry],
      });
      let publisher: Redis | undefined;
      let broadcaster: ActionCableBroadcaster | undefined;
      return {
        name: "action_cable",
        async start() {
          const hub = hubOf();
          if (!hub)
            throw new Error("action_cable.redis_url is set, but kas has no cluster views to broadcast");
          const password = await readPassword(config.passwordFile);
          // No offline queue: while ActionCable's Redis is away, broadcasts fail (and are counted) at once.
          publisher = new Redis(redisUrl, {
            lazyConnect: true,
            enableOfflineQueue: false,
            maxRetriesPerRequest: 1,
            ...(password !== undefined && { password }),
          });
          publisher.on("error", (err: Error) => log.debug({ err: err.message }, "redis (action_cable)"));
          await publisher.connect().catch((err: Error) => {
            log.warn(
              { err: err.message },
              "ActionCable's Redis is not reachable yet; broadcasts fail until it is",
            );
          });
          const claimClient = kasRedis?.client;
          const claimPrefix = `${kasRedis?.keyPrefix ?? ""}cluster_views:actioncable:`;
          broadcaster = new ActionCableBroadcaster({
            hub,
            publisher,
            ...(config.channelPrefix !== undefined && { channelPrefix: config.channelPrefix }),
            maxPending: config.maxPending,
            ...(claimClient && {
              claim: async (key: string) =>
                (await claimClient.set(`${claimPrefix}${key}`, "1", "PX", CLAIM_TTL_MS, "NX")) === "OK",
            }),
            results,
            log,
          });
          broadcaster.start();
          log.info(
            { channelPrefix: config.channelPrefix ?? null },
            "broadcasting cluster views to ActionCable",
          );
        },
        drain() {
          broadcaster?.stop();
        },
        async close(graceMs) {
          await broadcaster?.close(graceMs);
          publisher?.disconnect();
        },
      };
    },
  };
}

async function readPassword(path: string | undefined): Promise<string | undefined> {
  if (path === undefined) return undefined;
  try {
    return (await readFile(path, "utf8")).trim();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new ConfigError([{ field: "action_cable.password_file", message: `cannot read ${path}: ${code}` }]);
  }
}
