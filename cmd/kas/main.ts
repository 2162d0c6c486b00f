#!/usr/bin/env -S npx tsx
// kas, the agent server. This file composes the modules; each lives in its own folder.
import { realpathSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { createAgentAuthenticate, createAuthenticatorFromConfig } from "./auth/index.ts";
import { ConfigError, kasHelp, loadKasConfig, parseKasArgs, readKasSecrets } from "./config/index.ts";
import {
  createKasMetrics,
  createLogger,
  ReadinessChecks,
  serveObservability,
} from "./observability/index.ts";

/** Exit codes: 0 done, 1 failed while running, 2 bad usage or configuration. */
export async function main(argv: readonly string[]): Promise<number> {
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
  const metrics = createKasMetrics();
  const readiness = new ReadinessChecks();
  const cleanup: (() => Promise<void>)[] = [];
  try {
    const authenticator = await createAuthenticatorFromConfig(config, secrets, log);
    cleanup.push(() => authenticator.close());
    const observability = await serveObservability({
      listen: config.observability.listen.address,
      registry: metrics.registry,
      readiness,
      paths: {
        metrics: config.observability.prometheus.urlPath,
        liveness: config.observability.livenessProbe.urlPath,
        readiness: config.observability.readinessProbe.urlPath,
      },
      log,
    });
    cleanup.push(() => observability.close());
    log.info({ url: observability.url }, "observability listening");

    const authenticate = createAgentAuthenticate({
      authenticator,
      log,
      onResult: (result) => metrics.agentAuth.inc({ result }),
    });
    // ─── LISTENERS AND ROUTER: wired here by the lead once lib/router lands ───────────────────
    // - agent listener (config.agent.listen): serveTunnels({ host, port, authenticate,
    //   handshakeTimeoutMs: config.agent.listen.handshakeTimeoutMs, onSession(s) {
    //   metrics.tunnels.track(s, s.identity.agentId); router.register(s) } }); TLS from
    //   certificateFile/keyFile; drain tunnels older than maxConnectionAgeMs.
    // - router (Redis at config.redis, advertising config.privateApi.ownUrl):
    //   readiness.add("redis", ...).
    // - private API (config.privateApi.listen, secrets.privateApiSecret), API for GitLab
    //   (config.api.listen, secrets.apiSecret), Kubernetes API proxy (config.agent.kubernetesApi).
    // - request durations: metrics.requests.start(route) in each front.
    void authenticate;
    // ──────────────────────────────────────────────────────────────────────────────────────────

    const signal = await shutdownSignal();
    log.info({ signal }, "shutting down");
    return 0;
  } catch (err) {
    log.fatal({ err }, "kas failed");
    return 1;
  } finally {
    for (const close of cleanup.reverse()) await close().catch(() => {});
    await new Promise<void>((resolve) => log.flush(() => resolve()));
  }
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
