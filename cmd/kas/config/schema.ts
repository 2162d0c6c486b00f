// kas's configuration schema: GitLab's kas configuration names (snake_case in YAML, camelCase here;
// a duration's property ends in `Ms`), the core sections and, where a module owns one, its
// section imported from the module. The loader, the environment overrides, `--help` and the
// configuration's type all come from this one schema.
import { z } from "zod";
import { agentConfigurationKasSection } from "../../../modules/agent_configuration/kas/config.ts";
import { actionCableKasSection } from "../../../modules/cluster_views/kas/actioncable-config.ts";
import { dashboardKasSection } from "../../../modules/dashboard/kas/config.ts";
import { gitopsKasSection } from "../../../modules/gitops/kas/config.ts";
import { kubernetesApiKasSection } from "../../../modules/kubernetes_api/kas/config.ts";
import { observabilityKasSection } from "../../../modules/observability/config.ts";
import {
  boolSetting,
  checkTlsPair,
  countSetting,
  durationAtLeast,
  durationSetting,
  fileSetting,
  listenSection,
  networkSetting,
  notUsedSetting,
  shareSetting,
  stringSetting,
  tlsPair,
} from "../../../tool/config/kinds.ts";
import { type SettingLeaf, setting, settingLeaves, yamlKeyOf } from "../../../tool/config/settings.ts";
import {
  type ListenAddress,
  parseBool,
  parseEndpoint,
  parseEndpointList,
  parseNonNegativeInt,
  parseNonNegativeNumber,
  parsePositiveDuration,
  parseUrl,
} from "../../../tool/config/values.ts";
import { gitalyKasSection } from "../repositories/config.ts";
import { connectionLimitsKasSection } from "./connection-limits.ts";

const gitlab = z.object({
  address: setting((v) => parseUrl(v, ["http", "https"]), {
    kind: "URL",
    doc: "GitLab's internal URL; agents are authenticated against its internal API. Required unless agent.static_tokens_file is set.",
  }),
  authenticationSecretFile: fileSetting({
    doc: "Secret shared with GitLab (32 bytes, base64) that signs the Gitlab-Kas-Api-Request JWT. Required with gitlab.address.",
  }),
  externalUrl: setting((v) => parseUrl(v, ["http", "https"]), {
    kind: "URL",
    doc: "GitLab's URL as browsers see it: the one origin whose pages may call the Kubernetes API proxy (CORS, with the session cookie).",
  }),
  caCertificateFile: fileSetting({ doc: "Extra CA certificate(s), PEM, to trust for gitlab.address." }),
  requestTimeoutMs: durationSetting({ default: "5s", doc: "Timeout of one request to GitLab." }),
  retryDeadlineMs: durationSetting({
    default: "8s",
    doc: "Deadline for a request to GitLab, retries included (keep it below the handshake timeout).",
  }),
  // GitLab's kas throttles every call to GitLab; this one caches GitLab's answers instead
  // (agent.info_cache_ttl and the other caches), so there is no bucket to size.
  apiRateLimit: z.object({
    refillRatePerSecond: notUsedSetting(parseNonNegativeNumber, {
      kind: "number",
      doc: "GitLab's: calls to GitLab per second.",
      notUsed:
        "this kas does not rate-limit its calls to GitLab (it caches GitLab's answers: agent.info_cache_ttl)",
    }),
    bucketSize: notUsedSetting(parseNonNegativeInt, {
      kind: "integer",
      doc: "GitLab's: burst of calls to GitLab.",
      notUsed:
        "this kas does not rate-limit its calls to GitLab (it caches GitLab's answers: agent.info_cache_ttl)",
    }),
  }),
});

const REDIS_CONN_INFO = "this kas times its Redis records of connected agents itself";

const agent = z.object({
  listen: listenSection(
    { default: "127.0.0.1:8150", doc: "Where agentk connects." },
    {
      // GitLab's kas serves gRPC or, with this, gRPC inside WebSocket; this one's agentk always
      // opens a WebSocket tunnel, so neither value changes anything.
      websocket: notUsedSetting(parseBool, {
        kind: "boolean",
        doc: "GitLab's: gRPC through WebSocket. This kas's agent listener always takes WebSocket tunnels.",
        notUsed: "this kas's agent listener always takes agentk's WebSocket tunnels, whatever the value",
      }),
      // One minute less the 10 % jitter still outlasts agentk's 30 s before it trusts a tunnel, so
      // an age drain is answered by an immediate reconnect, not taken for a server shedding load;
      // it also keeps each agent to about one handshake (one GitLab lookup) a minute.
      maxConnectionAgeMs: durationAtLeast(
        "1m",
        "each drain makes the agent reconnect and authenticate again",
        {
          default: "7200s",
          doc: "Tunnels older than this, give or take 10 %, are drained (agentk reconnects, possibly to another replica). At least 1m.",
        },
      ),
      keepaliveIntervalMs: durationSetting({
        default: "60s",
        doc: "kas pings a tunnel that has been quiet this long (agentk pings after 55 s of quiet itself, so idle tunnels are rarely pinged from here); an unanswered ping closes it.",
      }),
      handshakeTimeoutMs: durationSetting({
        default: "10s",
        doc: "Deadline for a WebSocket handshake, authentication included.",
      }),
      // A replica's worth of agents reconnecting at once costs the replica that takes them a few ms
      // of its one thread each; unpaced, the tunnels already open waited behind them (bench:herd).
      handshakeLoopUtilization: shareSetting({
        default: 0.5,
        doc: "Authenticated handshakes complete while kas's event loop was busy less than this share of the last few milliseconds, and wait otherwise (within handshake_timeout), one at least every 50 ms: agents arriving in bulk slow down instead of stalling the tunnels already open. 1: no pacing.",
      }),
      // GitLab's kas counts every agentk gRPC call against 40000 a minute; here agentk's calls
      // ride its tunnel and only handshakes count, so the default is what a fleet reconnecting
      // all at once (max_tunnels_per_token) needs, several times over, and no more.
      connectionsPerTokenPerMinute: countSetting({
        default: 600,
        doc: "WebSocket handshakes one agent token may attempt per minute (UTC minutes), every kas replica together through Redis (each replica on its own without Redis, or while Redis is unreachable). Counted before authentication; past it: HTTP 429 with Retry-After (the rest of the minute).",
      }),
      maxTunnelsPerToken: countSetting({
        default: 100,
        doc: "Tunnels one agent token may hold open at once, every kas replica together through Redis (each replica on its own without Redis, or while Redis is unreachable). Each agentk replica holds one, two while it moves to another kas replica. Past it: HTTP 429 with Retry-After: 30.",
      }),
      // Its own cap, above connection_limits.max_connections: a replica is built to hold 20,000
      // agents, and each holds two tunnels for a moment when it moves (make-before-break).
      maxConnections: countSetting({
        default: 40000,
        doc: "Connections open at once on the agent listener (tunnels and handshakes); past it, new ones are closed as they arrive. Keep it below the process's open-files limit.",
      }),
    },
  ),
  dialTimeoutMs: durationSetting({
    default: "5s",
    doc: "How long a request for an agent waits for its tunnel (on any replica) before failing with 503.",
  }),
  staticTokensFile: fileSetting({
    doc: "YAML/JSON file of token -> {agentId, projectId, agentName, repository, manifest_projects}: authenticates agents without GitLab (development); repository, the absolute path of a git repository on kas's disk, is the agent's configuration project; manifest_projects maps the full paths of the GitOps manifest projects the agent may read to the absolute paths of their git repositories.",
  }),
  infoCacheTtlMs: durationSetting({
    default: "300s",
    doc: "How long a successful authentication is cached; connected agents' tokens are re-checked this often (at least every 1s).",
  }),
  infoCacheErrorTtlMs: durationSetting({
    default: "60s",
    doc: "How long a refused authentication (401/403/404) is cached.",
  }),
  infoCacheMaxEntries: countSetting({ default: 10000, doc: "Bound on cached authentications." }),
  // The agent tracker keeps its Redis records on its own timings (modules/agent_tracker).
  redisConnInfoTtlMs: notUsedSetting(parsePositiveDuration, {
    kind: "duration",
    doc: "GitLab's: TTL of connected agents' records in Redis.",
    notUsed: REDIS_CONN_INFO,
  }),
  redisConnInfoRefreshMs: notUsedSetting(parsePositiveDuration, {
    kind: "duration",
    doc: "GitLab's: refresh period of connected agents' records in Redis.",
    notUsed: REDIS_CONN_INFO,
  }),
  redisConnInfoGcMs: notUsedSetting(parsePositiveDuration, {
    kind: "duration",
    doc: "GitLab's: clean-up period of stale connected agents' records in Redis.",
    notUsed: REDIS_CONN_INFO,
  }),
  remoteDevelopment: z.object({
    pollPeriodMs: notUsedSetting(parsePositiveDuration, {
      kind: "duration",
      doc: "GitLab's: poll period of the remote development module.",
      notUsed: "this kas has no remote development module",
    }),
  }),
  kubernetesApi: kubernetesApiKasSection,
  configuration: agentConfigurationKasSection,
  gitops: gitopsKasSection,
});

const api = z.object({
  listen: listenSection(
    { default: "127.0.0.1:8153", doc: "API for GitLab." },
    {
      authenticationSecretFile: fileSetting({
        doc: "Secret (32 bytes, base64) of the JWTs GitLab presents to the API.",
      }),
      maxConnectionAgeMs: durationSetting({
        default: "2h",
        doc: "gRPC connections from GitLab are renewed about this often: GOAWAY after 20 % of it (+-10 %), calls in flight then get 65 % of it to finish (GitLab kas's split), so renewals stay below a load balancer's limit of this age.",
      }),
    },
  ),
});

const privateApi = z.object({
  listen: listenSection(
    { default: "127.0.0.1:8155", doc: "kas-to-kas tunnel forwarding." },
    {
      authenticationSecretFile: fileSetting({
        doc: "Secret (32 bytes, base64) signing the JWTs kas replicas present to each other.",
      }),
      certificateFile: fileSetting({
        doc: "TLS certificate, PEM, of the private API (with key_file); own_url is then wss:// or https://.",
      }),
      caCertificateFile: fileSetting({
        doc: "Extra CA certificate(s), PEM, to trust for other replicas' private API.",
      }),
      maxConnectionAgeMs: notUsedSetting(parsePositiveDuration, {
        kind: "duration",
        doc: "GitLab's: kas-to-kas connections older than this are renewed.",
        notUsed: "this kas does not renew kas-to-kas connections by age",
      }),
    },
  ),
  ownUrl: setting((v) => parseUrl(v, ["ws", "wss", "http", "https"]), {
    kind: "URL",
    envAliases: ["OWN_PRIVATE_API_URL"],
    doc: "URL other replicas use to reach this one's private API (advertised in Redis).",
  }),
});

// Fields GitLab's kas itself marks deprecated and unused, accepted so its files still load.
const GITLAB_UNUSED = "GitLab's kas does not use it either (deprecated)";

const redis = z.object({
  network: networkSetting(["", "tcp", "unix"], "kas connects to Redis"),
  server: z.object({
    address: setting(parseEndpoint, {
      kind: "host:port",
      doc: "Redis shared by the kas replicas (or redis.sentinel). Unset: a single replica, no cross-replica routing.",
    }),
  }),
  sentinel: z.object({
    masterName: stringSetting({
      doc: "Redis Sentinel: the master group to ask the sentinels for (instead of redis.server).",
    }),
    addresses: setting(parseEndpointList, {
      kind: "host:port list",
      doc: "Redis Sentinel: the sentinels (YAML list, or comma-separated in the environment).",
    }),
    sentinelPasswordFile: fileSetting({ doc: "Password of the sentinels themselves." }),
  }),
  username: stringSetting({ doc: "Redis ACL user name." }),
  passwordFile: fileSetting({ doc: "Redis password." }),
  databaseIndex: setting(parseNonNegativeInt, { kind: "integer", default: 0, doc: "Redis database number." }),
  keyPrefix: stringSetting({ default: "gitlab-kas", doc: "Prefix of kas's Redis keys." }),
  dialTimeoutMs: durationSetting({ default: "5s", doc: "Redis connect timeout." }),
  writeTimeoutMs: notUsedSetting(parsePositiveDuration, {
    kind: "duration",
    doc: "GitLab's: Redis write timeout.",
    notUsed: "this kas bounds no Redis write on its own (redis.dial_timeout bounds connecting)",
  }),
  poolSize: notUsedSetting(parseNonNegativeInt, {
    kind: "integer",
    doc: "GitLab's, deprecated.",
    notUsed: GITLAB_UNUSED,
  }),
  readTimeoutMs: notUsedSetting(parsePositiveDuration, {
    kind: "duration",
    doc: "GitLab's, deprecated.",
    notUsed: GITLAB_UNUSED,
  }),
  idleTimeoutMs: notUsedSetting(parsePositiveDuration, {
    kind: "duration",
    doc: "GitLab's, deprecated.",
    notUsed: GITLAB_UNUSED,
  }),
  tls: z
    .object({
      enabled: boolSetting({ default: false, doc: "Connect to Redis (and the sentinels) over TLS." }),
      caCertificateFile: fileSetting({ doc: "Extra CA certificate(s), PEM, to trust for Redis." }),
      ...tlsPair,
      certificateFile: fileSetting({
        doc: "Client certificate, PEM, for a Redis that requires one (with key_file).",
      }),
      keyFile: fileSetting({ doc: "Client private key, PEM (with certificate_file)." }),
    })
    .superRefine(checkTlsPair),
});

const kasSchema = z.object({
  gitlab,
  agent,
  gitaly: gitalyKasSection,
  observability: observabilityKasSection,
  api,
  privateApi,
  redis,
  dataDir: fileSetting({
    doc: "Where kas keeps what it makes itself (the Kubernetes API proxy's certificate). Default: $XDG_STATE_HOME/gitlab-kas, or ~/.local/state/gitlab-kas.",
  }),
  actionCable: actionCableKasSection,
  dashboard: dashboardKasSection,
  connectionLimits: connectionLimitsKasSection,
  shutdownGracePeriodMs: durationSetting({
    default: "30s",
    doc: "On SIGTERM: how long in-flight requests and tunnel streams get to finish before they are cut.",
  }),
  shutdownDrainDelayMs: durationSetting({
    default: "5s",
    doc: "On SIGTERM: how long the HTTP fronts (API, Kubernetes API proxy) keep accepting after readiness turns 503, so load balancers take this replica out before it stops accepting and closes its keep-alive connections as they go quiet (every response meanwhile says Connection: close). Counted within shutdown_grace_period, at most half of it.",
  }),
});

/** The validated configuration. Durations are milliseconds (the `Ms` suffix); files are paths, read by `readKasSecrets`. */
export type KasConfig = z.output<typeof kasSchema>;

/**
 * The schema with the checks that span sections. They run even when a field is invalid (that
 * field then holds no usable value), so every problem is reported at once.
 */
export const kasConfigSchema = kasSchema.superRefine(checkCombinations, { when: () => true });

function checkCombinations(c: KasConfig, ctx: z.RefinementCtx): void {
  const fail = (path: string[], message: string) => ctx.addIssue({ code: "custom", path, message });
  if (!given(c.gitlab.address) && !given(c.agent.staticTokensFile)) {
    fail(
      ["gitlab", "address"],
      "required (or set agent.static_tokens_file to authenticate agents without GitLab)",
    );
  }
  if (given(c.gitlab.address) && !given(c.gitlab.authenticationSecretFile)) {
    fail(["gitlab", "authenticationSecretFile"], "required when gitlab.address is set");
  }
  const { sentinel } = c.redis;
  if (given(sentinel.masterName) !== given(sentinel.addresses)) {
    const missing = !given(sentinel.masterName) ? "masterName" : "addresses";
    fail(["redis", "sentinel", missing], "required: master_name and addresses go together");
  }
  const sentinelSet = given(sentinel.masterName) || given(sentinel.addresses);
  if (sentinelSet && given(c.redis.server.address)) {
    fail(["redis", "sentinel"], "set either redis.server.address or redis.sentinel, not both");
  }
  const clustered = given(c.redis.server.address) || sentinelSet;
  const privateListen = c.privateApi.listen;
  if (clustered && !given(privateListen.authenticationSecretFile)) {
    fail(
      ["privateApi", "listen", "authenticationSecretFile"],
      "required when Redis is configured (kas replicas authenticate each other with it)",
    );
  }
  // Peers dial the URL a replica advertises in Redis; a bind-all address is not one they can dial.
  const { port } = privateListen.address;
  if (
    clustered &&
    !given(c.privateApi.ownUrl) &&
    given(privateListen.address) &&
    anyHost(privateListen.address.host)
  ) {
    fail(
      ["privateApi", "ownUrl"],
      `required when Redis is configured and private_api.listen.address binds every interface ` +
        `(port ${port}): other replicas cannot dial that; set the URL they reach this one at, ` +
        `e.g. ws://<pod IP>:${port} (or OWN_PRIVATE_API_URL)`,
    );
  }
  if (given(privateListen.certificateFile) && /^(ws|http):/.test(c.privateApi.ownUrl ?? "")) {
    fail(
      ["privateApi", "ownUrl"],
      "must be wss:// or https:// when the private API serves TLS (private_api.listen.certificate_file)",
    );
  }
  // Two listeners on one port would fail at bind time with a less helpful message.
  const listeners: [string[], ListenAddress][] = [
    [["agent", "listen", "address"], c.agent.listen.address],
    [["agent", "kubernetesApi", "listen", "address"], c.agent.kubernetesApi.listen.address],
    [["observability", "listen", "address"], c.observability.listen.address],
    [["api", "listen", "address"], c.api.listen.address],
    [["privateApi", "listen", "address"], c.privateApi.listen.address],
  ];
  const dashboard = c.dashboard.listen.address;
  if (given(dashboard) && dashboard) listeners.push([["dashboard", "listen", "address"], dashboard]);
  listeners.forEach(([path, { host, port }], i) => {
    if (typeof port !== "number") return; // invalid, reported on its own
    const clash = listeners
      .slice(0, i)
      .find(
        ([, l]) => port !== 0 && l.port === port && (anyHost(l.host) || anyHost(host) || l.host === host),
      );
    if (clash) fail(path, `port ${port} is already used by ${yamlPath(clash[0])}`);
  });
  if (c.gitlab.retryDeadlineMs >= c.agent.listen.handshakeTimeoutMs) {
    fail(
      ["gitlab", "retryDeadlineMs"],
      `must be shorter than agent.listen.handshake_timeout (${c.agent.listen.handshakeTimeoutMs} ms)`,
    );
  }
}

/** Set to a valid value: an invalid one (reported on its own) counts as not set. */
function given(value: unknown): boolean {
  return value !== undefined && value !== z.NEVER;
}

function anyHost(host: string | undefined): boolean {
  return host === undefined || host === "0.0.0.0" || host === "::";
}

function yamlPath(keys: string[]): string {
  return keys.map((k) => yamlKeyOf(k)).join(".");
}

/** `KAS_` + the path in upper snake case: agent.listen.address -> KAS_AGENT_LISTEN_ADDRESS. */
export function envNameOf(path: string): string {
  return `KAS_${path.replaceAll(".", "_").toUpperCase()}`;
}

/** Every kas setting, with its YAML path and what `--help` says of it. */
export const KAS_FIELDS: readonly SettingLeaf[] = settingLeaves(kasSchema);

export type { ListenConfig, TlsFiles } from "../../../tool/config/values.ts";
