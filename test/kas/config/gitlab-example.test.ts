// GitLab's own example configuration of its kas (v16.5) loads here unchanged but for its secret
// files: every field of GitLab's schema is mapped, implemented, or accepted and reported.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  ConfigError,
  loadKasConfig,
  notUsedWarnings,
  readKasSecrets,
} from "../../../cmd/kas/config/index.ts";
import { writeGitlabExample } from "../support/gitlab-example.ts";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "kas-gitlab-example-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function issuesLoading(edit: (text: string) => string): Promise<string[]> {
  const configFile = await writeGitlabExample(dir, edit);
  const err = await loadKasConfig({ configFile, env: {} }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).message.split("\n");
}

describe("GitLab's kas example configuration", () => {
  test("loads, its values mapped to kas's settings of the same meaning, and its secrets read", async () => {
    const config = await loadKasConfig({ configFile: await writeGitlabExample(dir), env: {} });
    expect(config.gitlab.address).toBe("http://localhost:8080/");
    expect(config.agent.listen).toMatchObject({
      network: "tcp",
      address: { host: "127.0.0.1", port: 8150 },
      connectionsPerTokenPerMinute: 40000,
      maxConnectionAgeMs: 7_200_000,
    });
    expect(config.agent.gitops).toMatchObject({ pollPeriodMs: 300_000, projectInfoCacheErrorTtlMs: 60_000 });
    expect(config.agent.kubernetesApi.listen.address).toEqual({ host: "0.0.0.0", port: 8154 });
    expect(config.gitaly.perServerApiRateLimit).toEqual({ refillRatePerSecond: 15, bucketSize: 40 });
    expect(config.redis).toMatchObject({
      network: "tcp",
      server: { address: { host: "localhost", port: 6380 } },
      keyPrefix: "gitlab-kas",
    });
    expect(config.api.listen.maxConnectionAgeMs).toBe(7_200_000);
    expect(config.observability.usageReportingPeriodMs).toBe(60_000);
    const secrets = await readKasSecrets(config);
    expect(secrets.redisPassword).toBeTruthy();
  });

  test("each of GitLab's settings kas does not act on is reported once, named", async () => {
    const config = await loadKasConfig({ configFile: await writeGitlabExample(dir), env: {} });
    expect(notUsedWarnings(config)).toEqual([
      "gitlab.api_rate_limit is GitLab's setting; this kas does not rate-limit its calls to GitLab (it caches GitLab's answers: agent.info_cache_ttl)",
      "agent.listen.listen_grace_period is GitLab's setting; this kas keeps every listener accepting for shutdown_drain_delay after SIGTERM",
      "agent.listen.websocket is GitLab's setting; this kas's agent listener always takes agentk's WebSocket tunnels, whatever the value",
      "agent.redis_conn_info_ttl, agent.redis_conn_info_refresh, agent.redis_conn_info_gc are GitLab's settings; this kas times its Redis records of connected agents itself",
      "agent.kubernetes_api.listen.listen_grace_period is GitLab's setting; this kas keeps every listener accepting for shutdown_drain_delay after SIGTERM",
      "agent.kubernetes_api.listen.shutdown_grace_period is GitLab's setting; this kas gives in-flight requests of every listener shutdown_grace_period",
      "observability.logging.grpc_level is GitLab's setting; this kas has no gRPC library log of its own (observability.logging.level covers everything)",
      "observability.sentry is GitLab's setting; this kas does not send errors to Sentry",
      "observability.google_profiler.enabled is GitLab's setting; this kas does not run the Google Cloud Profiler",
      "api.listen.listen_grace_period is GitLab's setting; this kas keeps every listener accepting for shutdown_drain_delay after SIGTERM",
      "private_api.listen.listen_grace_period is GitLab's setting; this kas keeps every listener accepting for shutdown_drain_delay after SIGTERM",
      "private_api.listen.max_connection_age is GitLab's setting; this kas does not renew kas-to-kas connections by age",
      "redis.write_timeout is GitLab's setting; this kas bounds no Redis write on its own (redis.dial_timeout bounds connecting)",
    ]);
  });

  test("a misspelled field is still refused, naming its YAML path", async () => {
    const issues = await issuesLoading((t) => t.replace("    websocket: false", "    web_socket: false"));
    expect(issues).toEqual(["agent.listen.web_socket: unknown field (from gitlab-kas.yaml)"]);
  });

  test("values are validated as GitLab's kascfg does: enums and durations", async () => {
    const issues = await issuesLoading((t) =>
      t
        .replace(
          "    network: tcp\n    address: 127.0.0.1:8150",
          "    network: udp\n    address: 127.0.0.1:8150",
        )
        .replace('  network: "tcp"', '  network: "unix"')
        .replace(
          '    listen_grace_period: "5s"\n  configuration',
          '    listen_grace_period: "soon"\n  configuration',
        )
        .replace("  google_profiler:\n    enabled: false", "  google_profiler:\n    enabled: maybe"),
    );
    expect(issues).toEqual(
      expect.arrayContaining([
        'agent.listen.network: expected one of tcp, tcp4, tcp6, unix, got "udp" (from gitlab-kas.yaml)',
        'agent.listen.listen_grace_period: expected a duration like "300s", "1m30s" or "250ms", got "soon" (from gitlab-kas.yaml)',
        'redis.network: "unix" is not offered: kas connects to Redis over TCP only (write tcp) (from gitlab-kas.yaml)',
        'observability.google_profiler.enabled: expected true or false, got "maybe" (from gitlab-kas.yaml)',
      ]),
    );
    expect(issues).toHaveLength(4);
  });
});
