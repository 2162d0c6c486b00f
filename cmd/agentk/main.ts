#!/usr/bin/env node
// agentk, the in-cluster agent, as a process: arguments, configuration, signals. agent.ts composes the modules.
import { realpathSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { ModuleCloseError } from "../../modules/runtime/index.ts";
import { ConfigError } from "../../tool/config/errors.ts";
import { exitIfStillRunning, LINGER_MS, SHUTDOWN_OVERRUN_MS } from "../../tool/exit-deadline.ts";
import { installProcessErrorPolicy } from "../../tool/process-errors.ts";
import { createAgent } from "./agent.ts";
import { type AgentkConfig, agentkHelp, loadAgentkConfig } from "./config/index.ts";
import { createAgentkMetrics, createLogger, ReadinessChecks } from "./observability/index.ts";

/** How long in-flight streams (a watch, an exec session) may run on after SIGTERM. */
const SHUTDOWN_GRACE_MS = 10_000;

/** Exit codes: 0 done, 1 failed while running or shutting down, 2 bad usage or configuration. */
export async function main(argv: readonly string[]): Promise<number> {
  let config: AgentkConfig;
  try {
    const args = await loadAgentkConfig({ argv });
    if (args.help) {
      process.stdout.write(agentkHelp());
      return 0;
    }
    config = args.config;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`agentk: invalid configuration:\n${err.message.replace(/^/gm, "  ")}\n`);
    return 2;
  }

  const log = createLogger({ level: config.logLevel, name: "agentk", base: { pod: config.pod.name } });
  installProcessErrorPolicy(log);
  const metrics = createAgentkMetrics();
  const readiness = new ReadinessChecks();
  let status = 0;
  // Listening from the start: a SIGTERM while starting up still ends in a clean shutdown.
  const signalled = new Promise<NodeJS.Signals>((resolve) => {
    for (const s of ["SIGTERM", "SIGINT"] as const) process.once(s, () => resolve(s));
  });
  const agent = createAgent(config, { log, metrics, readiness });
  try {
    await agent.start();
    log.info(
      {
        url: agent.urls.observability,
        kas: config.kasAddress,
        kubernetes: config.kubernetes.kind,
        services: config.services.map((s) => s.name),
      },
      "agentk starting",
    );
    const signal = await signalled;
    log.info({ signal }, "shutting down");
  } catch (err) {
    log.fatal({ err }, "agentk failed");
    status = 1;
  }
  const stuck = exitIfStillRunning(SHUTDOWN_GRACE_MS + SHUTDOWN_OVERRUN_MS, {
    log,
    code: 1,
    reason: `shutdown did not finish within ${SHUTDOWN_GRACE_MS + SHUTDOWN_OVERRUN_MS} ms`,
  });
  // On SIGTERM kas gets GoAway and in-flight streams their grace period.
  await agent.close(SHUTDOWN_GRACE_MS).catch((err: unknown) => {
    status = 1;
    for (const e of err instanceof ModuleCloseError ? err.errors : [err])
      log.error({ err: e }, "shutdown failed");
  });
  stuck();
  await new Promise<void>((resolve) => log.flush(() => resolve()));
  exitIfStillRunning(LINGER_MS, { log, code: status, reason: "stopped, but something is still open" });
  return status;
}

// Run when executed (also through a symlink such as node_modules/.bin), not when imported.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  process.exitCode = await main(process.argv.slice(2));
}
