import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  buildKasConfig,
  ConfigError,
  envNameOf,
  KAS_FIELDS,
  type KasConfig,
  loadKasConfig,
} from "../../../cmd/kas/config/index.ts";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "kas-config-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const MINIMAL = { agent: { static_tokens_file: "/etc/kas/tokens.yaml" } };

function issuesOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).message.split("\n");
  }
  throw new Error("expected a ConfigError");
}

describe("kas configuration", () => {
  test("defaults match GitLab's kas (ports 8150, 8151, 8153, 8154, 8155; cache TTLs 300 s / 60 s)", () => {
    const config = buildKasConfig(MINIMAL, {});
    expect(config).toEqual<KasConfig>({
      gitlab: { requestTimeoutMs: 5000, retryDeadlineMs: 8000, apiRateLimit: {} },
      agent: {
        listen: {
          address: { host: "127.0.0.1", port: 8150 },
          maxConnectionAgeMs: 7_200_000,
          keepaliveIntervalMs: 60_000,
          handshakeTimeoutMs: 10_000,
          handshakeLoopUtilization: 0.5,
          connectionsPerTokenPerMinute: 600,
          maxTunnelsPerToken: 100,
          maxConnections: 40_000,
        },
        dialTimeoutMs: 5000,
        staticTokensFile: "/etc/kas/tokens.yaml",
        infoCacheTtlMs: 300_000,
        infoCacheErrorTtlMs: 60_000,
        infoCacheMaxEntries: 10_000,
        remoteDevelopment: {},
        kubernetesApi: {
          listen: { address: { host: "0.0.0.0", port: 8154 }, plaintext: false },
          urlPathPrefix: "/",
          allowedAgentCacheTtlMs: 60_000,
          allowedAgentCacheErrorTtlMs: 10_000,
        },
        configuration: { pollPeriodMs: 300_000, maxConfigurationFileSize: 131_072 },
        gitops: {
          pollPeriodMs: 20_000,
          projectInfoCacheTtlMs: 300_000,
          projectInfoCacheErrorTtlMs: 60_000,
          maxManifestFileSize: 5_242_880,
          maxTotalManifestFileSize: 20_971_520,
          maxNumberOfPaths: 100,
          maxNumberOfFiles: 1000,
        },
      },
      gitaly: {
        globalApiRateLimit: { refillRatePerSecond: 30, bucketSize: 70 },
        perServerApiRateLimit: { refillRatePerSecond: 15, bucketSize: 40 },
        perAgentApiRateLimit: { refillRatePerSecond: 1, bucketSize: 10 },
        clusterApiRateLimit: { refillRatePerSecond: 100, bucketSize: 200 },
      },
      observability: {
        usageReportingPeriodMs: 60_000,
        listen: { address: { host: "127.0.0.1", port: 8151 } },
        prometheus: { urlPath: "/metrics" },
        livenessProbe: { urlPath: "/liveness" },
        readinessProbe: { urlPath: "/readiness" },
        logging: { level: "info" },
        tracing: {},
        sentry: {},
        googleProfiler: {},
      },
      api: { listen: { address: { host: "127.0.0.1", port: 8153 }, maxConnectionAgeMs: 7_200_000 } },
      privateApi: { listen: { address: { host: "127.0.0.1", port: 8155 } } },
      redis: {
        server: {},
        sentinel: {},
        databaseIndex: 0,
        keyPrefix: "gitlab-kas",
        dialTimeoutMs: 5000,
        tls: { enabled: false },
      },
      actionCable: { maxPending: 1000 },
      dashboard: { listen: {}, sessionTtlMs: 43_200_000, sessionGeneration: 1 },
      connectionLimits: {
        headerTimeoutMs: 10_000,
        bodyTimeoutMs: 60_000,
        idleTimeoutMs: 60_000,
        maxConnections: 10_000,
        maxStreamsPerConnection: 100,
        unauthenticatedTimeoutMs: 30_000,
      },
      shutdownGracePeriodMs: 30_000,
      shutdownDrainDelayMs: 5000,
    });
  });

  test("a YAML file with GitLab's field names, read through --config", async () => {
    const path = join(dir, "kas.yaml");
    await writeFile(
      path,
      `gitlab:
  address: https://gitlab.example.com/
  authentication_secret_file: /etc/kas/gitlab_secret
agent:
  listen:
    address: ":8150"
    certificate_file: /tls/crt.pem
    key_file: /tls/key.pem
  info_cache_ttl: 10m
  info_cache_error_ttl: 1m30s
  kubernetes_api:
    url_path_prefix: /k8s-proxy
observability:
  logging:
    level: debug
redis:
  server:
    address: redis.internal:6379
private_api:
  listen:
    address: "[::]:8155"
    authentication_secret_file: /etc/kas/private_api_secret
  own_url: ws://10.0.0.7:8155
`,
    );
    const config = await loadKasConfig({ configFile: path, env: {} });
    expect(config.gitlab.address).toBe("https://gitlab.example.com/");
    expect(config.gitlab.authenticationSecretFile).toBe("/etc/kas/gitlab_secret");
    expect(config.agent.listen).toMatchObject({
      address: { host: undefined, port: 8150 },
      certificateFile: "/tls/crt.pem",
      keyFile: "/tls/key.pem",
    });
    expect(config.agent.infoCacheTtlMs).toBe(600_000);
    expect(config.agent.infoCacheErrorTtlMs).toBe(90_000);
    expect(config.agent.kubernetesApi.urlPathPrefix).toBe("/k8s-proxy");
    expect(config.observability.logging.level).toBe("debug");
    expect(config.redis.server.address).toEqual({ host: "redis.internal", port: 6379 });
    expect(config.privateApi.listen.address).toEqual({ host: "::", port: 8155 });
  });

  test("redis needs the private API secret (replicas authenticate each other)", () => {
    const lines = issuesOf(() =>
      buildKasConfig({ ...MINIMAL, redis: { server: { address: "r:6379" } } }, {}),
    );
    expect(lines).toContainEqual(
      expect.stringContaining("private_api.listen.authentication_secret_file: required"),
    );
  });

  test("redis through Sentinel, with ACL user, database, and TLS with a private CA", () => {
    const config = buildKasConfig(
      {
        ...MINIMAL,
        redis: {
          sentinel: {
            master_name: "gitlab-redis",
            addresses: ["sentinel-0:26379", "sentinel-1:26379"],
            sentinel_password_file: "/s/sentinel",
          },
          username: "kas",
          password_file: "/s/redis",
          database_index: 3,
          tls: { enabled: true, ca_certificate_file: "/tls/ca.pem" },
        },
        private_api: { listen: { authentication_secret_file: "/s/private" } },
      },
      {},
    );
    expect(config.redis).toMatchObject({
      server: {},
      sentinel: {
        masterName: "gitlab-redis",
        addresses: [
          { host: "sentinel-0", port: 26379 },
          { host: "sentinel-1", port: 26379 },
        ],
        sentinelPasswordFile: "/s/sentinel",
      },
      username: "kas",
      passwordFile: "/s/redis",
      databaseIndex: 3,
      tls: { enabled: true, caCertificateFile: "/tls/ca.pem" },
    });
    // In the environment the sentinels are one comma-separated value.
    const fromEnv = buildKasConfig(MINIMAL, {
      KAS_REDIS_SENTINEL_MASTER_NAME: "m",
      KAS_REDIS_SENTINEL_ADDRESSES: "a:1, b:2",
      KAS_PRIVATE_API_LISTEN_AUTHENTICATION_SECRET_FILE: "/s",
    });
    expect(fromEnv.redis.sentinel.addresses).toEqual([
      { host: "a", port: 1 },
      { host: "b", port: 2 },
    ]);
  });

  test.each([
    [
      { sentinel: { master_name: "m" } },
      "redis.sentinel.addresses: required: master_name and addresses go together",
    ],
    [{ sentinel: { addresses: ["a:1"] } }, "redis.sentinel.master_name: required"],
    [
      { server: { address: "r:6379" }, sentinel: { master_name: "m", addresses: ["a:1"] } },
      "redis.sentinel: set either redis.server.address or redis.sentinel, not both",
    ],
    [
      { server: { address: "r:6379" }, sentinel: { master_name: "m", addresses: [] } },
      "redis.sentinel.addresses: expected at least one host:port",
    ],
    [
      { server: { address: "r:6379" }, tls: { enabled: true, certificate_file: "/c" } },
      "redis.tls.key_file: required",
    ],
  ])("redis %j is refused: %s", (redis, message) => {
    const doc = { ...MINIMAL, redis, private_api: { listen: { authentication_secret_file: "/s" } } };
    expect(issuesOf(() => buildKasConfig(doc, {}))).toContainEqual(expect.stringContaining(message));
  });

  test("redis with a bind-all private API needs own_url (peers cannot dial 0.0.0.0)", () => {
    const clustered = {
      ...MINIMAL,
      redis: { server: { address: "r:6379" } },
      private_api: { listen: { address: "0.0.0.0:8155", authentication_secret_file: "/s" } },
    };
    expect(issuesOf(() => buildKasConfig(clustered, {}))).toContainEqual(
      expect.stringContaining("private_api.own_url: required when Redis is configured"),
    );
    const advertised = {
      ...clustered,
      private_api: { ...clustered.private_api, own_url: "ws://10.0.0.7:8155" },
    };
    expect(buildKasConfig(advertised, {}).privateApi.ownUrl).toBe("ws://10.0.0.7:8155/");
    // A specific address is what peers dial when own_url is unset (one host, several replicas).
    const local = {
      ...clustered,
      private_api: { listen: { address: "127.0.0.1:8155", authentication_secret_file: "/s" } },
    };
    expect(buildKasConfig(local, {}).privateApi.ownUrl).toBeUndefined();
  });

  test("environment variables override the file", async () => {
    const path = join(dir, "env.yaml");
    await writeFile(path, "agent:\n  listen:\n    address: 127.0.0.1:9000\n  static_tokens_file: /a\n");
    const config = await loadKasConfig({
      configFile: path,
      env: {
        KAS_AGENT_LISTEN_ADDRESS: "0.0.0.0:9150",
        KAS_OBSERVABILITY_LOGGING_LEVEL: "WARN",
        KAS_AGENT_INFO_CACHE_TTL: "30s",
        KAS_REDIS_TLS_ENABLED: "true",
        KAS_GITLAB_ADDRESS: "http://gitlab:8080",
        KAS_GITLAB_AUTHENTICATION_SECRET_FILE: "/s",
        OWN_PRIVATE_API_URL: "ws://10.0.0.5:8155",
        KAS_API_LISTEN_ADDRESS: "", // empty counts as unset
      },
    });
    expect(config.agent.listen.address).toEqual({ host: "0.0.0.0", port: 9150 });
    expect(config.observability.logging.level).toBe("warn");
    expect(config.agent.infoCacheTtlMs).toBe(30_000);
    expect(config.redis.tls.enabled).toBe(true);
    expect(config.gitlab.address).toBe("http://gitlab:8080/");
    expect(config.privateApi.ownUrl).toBe("ws://10.0.0.5:8155/");
    expect(config.api.listen.address.port).toBe(8153);
  });

  test("every field has an environment variable named after its path", () => {
    expect(envNameOf("agent.listen.address")).toBe("KAS_AGENT_LISTEN_ADDRESS");
    expect(envNameOf("observability.logging.level")).toBe("KAS_OBSERVABILITY_LOGGING_LEVEL");
    for (const field of KAS_FIELDS) expect(envNameOf(field.path)).toMatch(/^KAS_[A-Z_]+$/);
  });

  test.each([
    ["agent.listen.address", "8150", 'agent.listen.address: expected host:port, got "8150"'],
    ["agent.listen.address", "localhost:99999", "agent.listen.address: port must be 0-65535, got 99999"],
    [
      "observability.listen.address",
      "a:b:c",
      'observability.listen.address: expected host:port, got "a:b:c"',
    ],
    [
      "gitlab.address",
      "gitlab.example.com",
      'gitlab.address: expected a http/https URL, got "gitlab.example.com"',
    ],
    ["gitlab.address", "ftp://x", 'gitlab.address: expected a http/https URL, got scheme "ftp"'],
    ["gitlab.address", "https://u:p@gitlab", "gitlab.address: must not contain credentials"],
    [
      "agent.info_cache_ttl",
      "5 minutes",
      'agent.info_cache_ttl: expected a duration like "300s", "1m30s" or "250ms"',
    ],
    ["agent.info_cache_ttl", 300, "agent.info_cache_ttl: expected a duration"],
    ["agent.listen.max_connection_age", "0s", "agent.listen.max_connection_age: must be at least 1m ("],
    ["agent.listen.max_connection_age", "59s", "agent.listen.max_connection_age: must be at least 1m ("],
    [
      "agent.listen.handshake_loop_utilization",
      0,
      "agent.listen.handshake_loop_utilization: expected a number above 0 and at most 1, got 0",
    ],
    [
      "agent.listen.handshake_loop_utilization",
      "1.5",
      'agent.listen.handshake_loop_utilization: expected a number above 0 and at most 1, got "1.5"',
    ],
    [
      "agent.listen.handshake_loop_utilization",
      "half",
      'agent.listen.handshake_loop_utilization: expected a number above 0 and at most 1, got "half"',
    ],
    [
      "agent.info_cache_max_entries",
      "0",
      'agent.info_cache_max_entries: expected a positive integer, got "0"',
    ],
    [
      "observability.logging.level",
      "loud",
      "observability.logging.level: expected one of trace, debug, info",
    ],
    [
      "observability.prometheus.url_path",
      "metrics",
      'observability.prometheus.url_path: expected a path starting with "/"',
    ],
    ["redis.server.address", ":6379", "redis.server.address: expected host:port with a host"],
    ["redis.tls.enabled", "yes", 'redis.tls.enabled: expected true or false, got "yes"'],
    ["redis.key_prefix", "", "redis.key_prefix: must not be empty"],
    ["redis.database_index", "-1", 'redis.database_index: expected an integer >= 0, got "-1"'],
    [
      "private_api.own_url",
      "grpc://x:1",
      'private_api.own_url: expected a ws/wss/http/https URL, got scheme "grpc"',
    ],
  ])("%s = %j is refused: %s", (path, value, message) => {
    const doc = structuredClone(MINIMAL) as Record<string, unknown>;
    setPath(doc, path, value);
    const issues = issuesOf(() => buildKasConfig(doc, {}, "/etc/kas/kas.yaml"));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toContain(message);
    expect(issues[0]).toMatch(/\(from kas\.yaml\)$/);
  });

  test("max_connection_age: one minute is the least accepted, from the file or the environment", () => {
    const doc = { ...MINIMAL, agent: { ...MINIMAL.agent, listen: { max_connection_age: "1m" } } };
    expect(buildKasConfig(doc, {}).agent.listen.maxConnectionAgeMs).toBe(60_000);
    const issues = issuesOf(() => buildKasConfig(MINIMAL, { KAS_AGENT_LISTEN_MAX_CONNECTION_AGE: "500ms" }));
    expect(issues).toEqual([
      'agent.listen.max_connection_age: must be at least 1m (each drain makes the agent reconnect and authenticate again), got "500ms" (from KAS_AGENT_LISTEN_MAX_CONNECTION_AGE)',
    ]);
  });

  test("a bad environment value names both the field and the variable", () => {
    const issues = issuesOf(() => buildKasConfig(MINIMAL, { KAS_AGENT_LISTEN_ADDRESS: "nope" }));
    expect(issues).toEqual([
      'agent.listen.address: expected host:port, got "nope" (from KAS_AGENT_LISTEN_ADDRESS)',
    ]);
  });

  test("every problem is reported at once, each on its own line", () => {
    const issues = issuesOf(() =>
      buildKasConfig(
        { agent: { listen: { address: "x" }, info_cache_ttl: "y" } },
        { KAS_REDIS_TLS_ENABLED: "maybe" },
      ),
    );
    expect(issues.map((i) => i.split(":")[0])).toEqual([
      "agent.listen.address",
      "agent.info_cache_ttl",
      "redis.tls.enabled",
      "gitlab.address",
    ]);
  });

  test("unknown fields and misplaced values are named", () => {
    const issues = issuesOf(() =>
      buildKasConfig(
        { ...MINIMAL, agnet: {}, observability: { listen: "127.0.0.1:1", logging: { levle: "x" } } },
        {},
      ),
    );
    expect(issues).toEqual([
      "agnet: unknown field (from config file)",
      "observability.listen: expected a mapping (from config file)",
      "observability.logging.levle: unknown field (from config file)",
    ]);
  });

  test.each([
    [{}, "gitlab.address: required (or set agent.static_tokens_file to authenticate agents without GitLab)"],
    [
      { gitlab: { address: "https://g" } },
      "gitlab.authentication_secret_file: required when gitlab.address is set",
    ],
    [
      { ...MINIMAL, api: { listen: { certificate_file: "/c" } } },
      "api.listen.key_file: required: certificate_file and key_file go together",
    ],
    [
      { ...MINIMAL, api: { listen: { address: "127.0.0.1:8150" } } },
      "api.listen.address: port 8150 is already used by agent.listen.address",
    ],
    [
      { ...MINIMAL, gitlab: { retry_deadline: "15s" } },
      "gitlab.retry_deadline: must be shorter than agent.listen.handshake_timeout (10000 ms)",
    ],
  ])("combinations: %j -> %s", (doc, message) => {
    expect(issuesOf(() => buildKasConfig(doc, {}))).toEqual([message]);
  });

  test("the same port on two different specific hosts is fine", () => {
    const config = buildKasConfig({ ...MINIMAL, api: { listen: { address: "10.0.0.1:8150" } } }, {});
    expect(config.api.listen.address).toEqual({ host: "10.0.0.1", port: 8150 });
  });

  test("file problems: missing file, invalid YAML, duplicate keys", async () => {
    await expect(loadKasConfig({ configFile: join(dir, "absent.yaml"), env: {} })).rejects.toThrow(
      /^--config: cannot read .*absent\.yaml: ENOENT/,
    );
    const bad = join(dir, "bad.yaml");
    await writeFile(bad, "agent:\n  listen: [\n");
    await expect(loadKasConfig({ configFile: bad, env: {} })).rejects.toThrow(
      /--config: .*bad\.yaml is not valid YAML/,
    );
    const dup = join(dir, "dup.yaml");
    await writeFile(dup, "agent:\n  static_tokens_file: /a\n  static_tokens_file: /b\n");
    await expect(loadKasConfig({ configFile: dup, env: {} })).rejects.toThrow(
      /not valid YAML.*[Mm]ap keys must be unique/,
    );
  });

  test("an empty file means all defaults", async () => {
    const path = join(dir, "empty.yaml");
    await writeFile(path, "# nothing\n");
    const config = await loadKasConfig({ configFile: path, env: { KAS_AGENT_STATIC_TOKENS_FILE: "/t" } });
    expect(config.agent.listen.address.port).toBe(8150);
  });
});

function setPath(doc: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split(".");
  let node = doc;
  for (const p of parts.slice(0, -1)) {
    node[p] ??= {};
    node = node[p] as Record<string, unknown>;
  }
  node[parts.at(-1)!] = value;
}
