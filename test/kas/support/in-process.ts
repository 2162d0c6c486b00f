import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { KasConfig } from "../../../cmd/kas/config/index.ts";
import { readKasSecrets } from "../../../cmd/kas/config/index.ts";
import { createKasServer, type KasAddresses, type KasServer } from "../../../cmd/kas/server.ts";
import { inProcessConfig, silentLogger, writeFixtures } from "./fixtures.ts";

export interface InProcessKas {
  kas: KasServer;
  addresses: KasAddresses;
  config: KasConfig;
  apiSecret: Uint8Array;
  close(): Promise<void>;
}

/** kas in this process on ephemeral ports: static tokens, API secret, no Redis; `adjust` edits the config. */
export async function startInProcessKas(
  adjust: (config: KasConfig) => void = () => {},
): Promise<InProcessKas> {
  const dir = await mkdtemp(join(tmpdir(), "kas-inproc-"));
  const files = await writeFixtures(dir);
  const config = inProcessConfig({
    agent: { static_tokens_file: files.tokensFile, dial_timeout: "1s" },
    api: { listen: { authentication_secret_file: files.apiSecretFile } },
  });
  adjust(config);
  const kas = createKasServer({
    config,
    secrets: await readKasSecrets(config),
    log: silentLogger(),
    tuning: { tunnel: { keepAliveIntervalMs: 0 } },
  });
  const addresses = await kas.start();
  return {
    kas,
    addresses,
    config,
    apiSecret: files.apiSecret,
    async close() {
      await kas.stop({ graceMs: 200 });
      await rm(dir, { recursive: true, force: true });
    },
  };
}
