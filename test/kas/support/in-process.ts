import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { KasConfig } from "../../../cmd/kas/config/index.ts";
import { readKasSecrets } from "../../../cmd/kas/config/index.ts";
import type { Logger } from "../../../cmd/kas/observability/index.ts";
import { createKasServer, type KasAddresses, type KasServer } from "../../../cmd/kas/server.ts";
import { inProcessConfig, silentLogger, writeFixtures } from "./fixtures.ts";

export interface InProcessKas {
  kas: KasServer;
  addresses: KasAddresses;
  config: KasConfig;
  apiSecret: Uint8Array;
  close(): Promise<void>;
}

export interface InProcessKasOptions {
  /** Default: silent. */
  log?: Logger;
  /** Clustered: this Redis and a private API. Default: no Redis (single replica). */
  redis?: { host: string; port: number };
  /** Cluster views' timings and bounds (heartbeats, buffered bytes, subscribers). Default: the daemon's. */
  clusterViews?: NonNullable<NonNullable<Parameters<typeof createKasServer>[0]["tuning"]>["clusterViews"]>;
}

/** kas in this process on ephemeral ports: static tokens, API secret, no Redis unless given; `adjust` edits the config. */
export async function startInProcessKas(
  adjust: (config: KasConfig) => void = () => {},
  options: InProcessKasOptions = {},
): Promise<InProcessKas> {
  const dir = await mkdtemp(join(tmpdir(), "kas-inproc-"));
  const files = await writeFixtures(dir);
  const config = inProcessConfig({
    agent: { static_tokens_file: files.tokensFile, dial_timeout: "1s" },
    api: { listen: { authentication_secret_file: files.apiSecretFile } },
    ...(options.redis && {
      redis: { server: { address: `${options.redis.host}:${options.redis.port}` } },
      private_api: { listen: { authentication_secret_file: files.privateSecretFile } },
    }),
  });
  adjust(config);
  const kas = createKasServer({
    config,
    secrets: await readKasSecrets(config),
    log: options.log ?? silentLogger(),
    tuning: {
      tunnel: { keepAliveIntervalMs: 0 },
      ...(options.clusterViews && { clusterViews: options.clusterViews }),
    },
  });
  const addresses = await kas.start();
  return {
    kas,
    addresses,
    config,
    apiSecret: files.apiSecret,
    async close() {
      await kas.close(200);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
