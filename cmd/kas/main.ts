#!/usr/bin/env node
// kas, the agent server, as a process: arguments, configuration, signals. server.ts composes the modules.
import { realpathSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { exitIfStillRunning, LINGER_MS, SHUTDOWN_OVERRUN_MS } from "../../tool/exit-deadline.ts";
import { installProcessErrorPolicy } from "../../tool/process-errors.ts";
import {
  ConfigError,
  kasHelp,
  loadKasConfig,
  notUsedWarnings,
  parseKasArgs,
  readKasSecrets,
} from "./config/index.ts";
import { kubeconfigMain } from "./kubeconfig.ts";
import { createLogger } from "./observability/index.ts";
import { redisConnection } from "./routing/index.ts";
import { createKasServer } from "./server.ts";

/** Exit codes: 0 done, 1 failed while running, 2 bad usage or configuration. */
export async function main(argv: readonly string[]): Promise<number> {
  if (argv[0] === "kubeconfig") return kubeconfigMain(argv.slice(1));
  let configFile: string | undefined;
  try {
    const args = parseKasArgs(argv);
    if (args.help) {
      process.stdout.write(kasHelp());
      return 0;
    }
    configFile = args.configFile;
  } catch (err) {
    return usageError(err);
  }

  let config: Awaited<ReturnType<typeof loadKasConfig>>;
  let secrets: Awaited<ReturnType<typeof readKasSecrets>>;
  try {
    config = await loadKasConfig(configFile === undefined ? {} : { configFile });
    secrets = await readKasSecrets(config);
  } catch (err) {
    return usageError(err);
  }

  const log = createLogger({ level: config.observability.logging.level, name: "kas" });
  installProcessErrorPolicy(log);
  for (const warning of notUsedWarnings(config)) log.warn({}, warning);
  const kas = createKasServer({ config, secrets, log });
  const signalled = shutdownSignal(); // a signal during start still stops kas gracefully
  let status: number;
  try {
    const addresses = await kas.start();
    // Tests and operators read the bound addresses from this line.
    log.info({ addresses, redis: redisConnection(config.redis) !== undefined }, "kas listening");
    const signal = await signalled;
    log.info({ signal, graceMs: config.shutdownGracePeriodMs }, "shutting down");
    const graceMs = config.shutdownGracePeriodMs;
    const stuck = exitIfStillRunning(graceMs + SHUTDOWN_OVERRUN_MS, {
      log,
      code: 1,
      reason: `shutdown did not finish within ${graceMs + SHUTDOWN_OVERRUN_MS} ms`,
    });
    await kas.close();
    stuck();
    log.info({}, "stopped");
    status = 0;
  } catch (err) {
    log.fatal({ err }, "kas failed");
    await kas.close(0).catch(() => {});
    status = 1;
  } finally {
    await new Promise<void>((resolve) => log.flush(() => resolve()));
  }
  exitIfStillRunning(LINGER_MS, { log, code: status, reason: "stopped, but something is still open" });
  return status;
}

function usageError(err: unknown): number {
  if (!(err instanceof ConfigError)) throw err;
  process.stderr.write(`kas: invalid configuration:\n${err.message.replace(/^/gm, "  ")}\n`);
  return 2;
}

function shutdownSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, () => resolve(signal));
  });
}

// Run when executed (also through a symlink such as node_modules/.bin), not when imported.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  process.exitCode = await main(process.argv.slice(2));
}
