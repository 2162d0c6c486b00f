// Every kas setting in one table: its path in the YAML file (the names of GitLab's kas
// configuration), its kind, default and documentation. The loader, the environment overrides and
// `--help` are all driven from here, so a setting is added in exactly one place.
import {
  type Endpoint,
  type ListenAddress,
  type ListenConfig,
  type LogLevel,
  parseBool,
  parseDuration,
  parseEndpoint,
  parseEndpointList,
  parseListenAddress,
  parseLogLevel,
  parseNonNegativeInt,
  parsePositiveInt,
  parseString,
  parseUrl,
  parseUrlPath,
  ValueError,
} from "../../common/config/values.ts";

export interface FieldSpec {
  /** Dotted path in the YAML file, e.g. "agent.listen.address". */
  path: string;
  parse: (raw: unknown) => unknown;
  /** Shown in `--help` as the kind of value expected. */
  kind: string;
  /** In the form an operator would write it ("300s"); parsed like any other value. */
  default?: string | number | boolean;
  /** Other environment variables that set this field, checked after the derived `KAS_...` name. */
  envAliases?: string[];
  doc: string;
}

const file = { parse: parseString, kind: "file path" };
const address = { parse: parseListenAddress, kind: "host:port" };
const duration = { parse: parseDuration, kind: "duration" };
/** A duration no shorter than `min` (written as an operator would, e.g. "1m"); `why` ends the refusal. */
const durationAtLeast = (min: string, why: string) => ({
  ...duration,
  parse: (raw: unknown) => {
    const ms = parseDuration(raw);
    if (ms < parseDuration(min))
      throw new ValueError(`must be at least ${min} (${why}), got ${JSON.stringify(raw)}`);
    return ms;
  },
});
const count = { parse: parsePositiveInt, kind: "integer" };
const urlPath = { parse: parseUrlPath, kind: "URL path" };

export const KAS_FIELDS: readonly FieldSpec[] = [
  {
    path: "gitlab.address",
    parse: (v) => parseUrl(v, ["http", "https"]),
    kind: "URL",
    doc: "GitLab's internal URL; agents are authenticated against its internal API. Required unless agent.static_tokens_file is set.",
  },
  {
    path: "gitlab.authentication_secret_file",
    ...file,
    doc: "Secret shared with GitLab (32 bytes, base64) that signs the Gitlab-Kas-Api-Request JWT. Required with gitlab.address.",
  },
  {
    path: "gitlab.ca_certificate_file",
    ...file,
    doc: "Extra CA certificate(s), PEM, to trust for gitlab.address.",
  },
  { path: "gitlab.request_timeout", ...duration, default: "5s", doc: "Timeout of one request to GitLab." },
  {
    path: "gitlab.retry_deadline",
    ...duration,
    default: "8s",
    doc: "Deadline for a request to GitLab, retries included (keep it below the handshake timeout).",
  },
  { path: "agent.listen.address", ...address, default: "127.0.0.1:8150", doc: "Where agentk connects." },
  { path: "agent.listen.certificate_file", ...file, doc: "TLS certificate, PEM (with key_file)." },
  { path: "agent.listen.key_file", ...file, doc: "TLS private key, PEM (with certificate_file)." },
  {
    path: "agent.listen.max_connection_age",
    // One minute less the 10 % jitter still outlasts agentk's 30 s before it trusts a tunnel, so
    // an age drain is answered by an immediate reconnect, not taken for a server shedding load;
    // it also keeps each agent to about one handshake (one GitLab lookup) a minute.
    ...durationAtLeast("1m", "each drain makes the agent reconnect and authenticate again"),
    default: "7200s",
    doc: "Tunnels older than this, give or take 10 %, are drained (agentk reconnects, possibly to another replica). At least 1m.",
  },
  {
    path: "agent.listen.keepalive_interval",
    ...duration,
    default: "60s",
    doc: "kas pings a tunnel that has been quiet this long (agentk pings after 55 s of quiet itself, so idle tunnels are rarely pinged from here); an unanswered ping closes it.",
  },
  {
    path: "agent.listen.handshake_timeout",
    ...duration,
    default: "10s",
    doc: "Deadline for a WebSocket handshake, authentication included.",
  },
  {
    path: "agent.dial_timeout",
    ...duration,
    default: "5s",
    doc: "How long a request for an agent waits for its tunnel (on any replica) before failing with 503.",
  },
  {
    path: "agent.static_tokens_file",
    ...file,
    doc: "YAML/JSON file of token -> {agentId, projectId, agentName}: authenticates agents without GitLab (development).",
  },
  {
    path: "agent.info_cache_ttl",
    ...duration,
    default: "300s",
    doc: "How long a successful authentication is cached; connected agents' tokens are re-checked this often (at least every 1s).",
  },
  {
    path: "agent.info_cache_error_ttl",
    ...duration,
    default: "60s",
    doc: "How long a refused authentication (401/403/404) is cached.",
  },
  { path: "agent.info_cache_max_entries", ...count, default: 10000, doc: "Bound on cached authentications." },
  {
    path: "agent.kubernetes_api.listen.address",
    ...address,
    default: "0.0.0.0:8154",
    doc: "Kubernetes API proxy for users and CI jobs.",
  },
  {
    path: "agent.kubernetes_api.listen.certificate_file",
    ...file,
    doc: "TLS certificate, PEM (with key_file).",
  },
  {
    path: "agent.kubernetes_api.listen.key_file",
    ...file,
    doc: "TLS private key, PEM (with certificate_file).",
  },
  {
    path: "agent.kubernetes_api.url_path_prefix",
    ...urlPath,
    default: "/",
    doc: "Path prefix of the proxy.",
  },
  {
    path: "observability.listen.address",
    ...address,
    default: "127.0.0.1:8151",
    doc: "Metrics and probes.",
  },
  { path: "observability.prometheus.url_path", ...urlPath, default: "/metrics", doc: "Prometheus metrics." },
  { path: "observability.liveness_probe.url_path", ...urlPath, default: "/liveness", doc: "Liveness probe." },
  {
    path: "observability.readiness_probe.url_path",
    ...urlPath,
    default: "/readiness",
    doc: "Readiness probe.",
  },
  {
    path: "observability.logging.level",
    parse: parseLogLevel,
    kind: "log level",
    default: "info",
    doc: "trace, debug, info, warn, error, fatal or silent.",
  },
  { path: "api.listen.address", ...address, default: "127.0.0.1:8153", doc: "API for GitLab." },
  {
    path: "api.listen.authentication_secret_file",
    ...file,
    doc: "Secret (32 bytes, base64) of the JWTs GitLab presents to the API.",
  },
  { path: "api.listen.certificate_file", ...file, doc: "TLS certificate, PEM (with key_file)." },
  { path: "api.listen.key_file", ...file, doc: "TLS private key, PEM (with certificate_file)." },
  {
    path: "private_api.listen.address",
    ...address,
    default: "127.0.0.1:8155",
    doc: "kas-to-kas tunnel forwarding.",
  },
  {
    path: "private_api.listen.authentication_secret_file",
    ...file,
    doc: "Secret (32 bytes, base64) signing the JWTs kas replicas present to each other.",
  },
  {
    path: "private_api.listen.certificate_file",
    ...file,
    doc: "TLS certificate, PEM, of the private API (with key_file); own_url is then wss:// or https://.",
  },
  { path: "private_api.listen.key_file", ...file, doc: "TLS private key, PEM (with certificate_file)." },
  {
    path: "private_api.listen.ca_certificate_file",
    ...file,
    doc: "Extra CA certificate(s), PEM, to trust for other replicas' private API.",
  },
  {
    path: "private_api.own_url",
    parse: (v) => parseUrl(v, ["ws", "wss", "http", "https"]),
    kind: "URL",
    envAliases: ["OWN_PRIVATE_API_URL"],
    doc: "URL other replicas use to reach this one's private API (advertised in Redis).",
  },
  {
    path: "redis.server.address",
    parse: parseEndpoint,
    kind: "host:port",
    doc: "Redis shared by the kas replicas (or redis.sentinel). Unset: a single replica, no cross-replica routing.",
  },
  {
    path: "redis.sentinel.master_name",
    parse: parseString,
    kind: "string",
    doc: "Redis Sentinel: the master group to ask the sentinels for (instead of redis.server).",
  },
  {
    path: "redis.sentinel.addresses",
    parse: parseEndpointList,
    kind: "host:port list",
    doc: "Redis Sentinel: the sentinels (YAML list, or comma-separated in the environment).",
  },
  { path: "redis.sentinel.sentinel_password_file", ...file, doc: "Password of the sentinels themselves." },
  { path: "redis.username", parse: parseString, kind: "string", doc: "Redis ACL user name." },
  { path: "redis.password_file", ...file, doc: "Redis password." },
  {
    path: "redis.database_index",
    parse: parseNonNegativeInt,
    kind: "integer",
    default: 0,
    doc: "Redis database number.",
  },
  {
    path: "redis.key_prefix",
    parse: parseString,
    kind: "string",
    default: "gitlab-kas",
    doc: "Prefix of kas's Redis keys.",
  },
  { path: "redis.dial_timeout", ...duration, default: "5s", doc: "Redis connect timeout." },
  {
    path: "redis.tls.enabled",
    parse: parseBool,
    kind: "boolean",
    default: false,
    doc: "Connect to Redis (and the sentinels) over TLS.",
  },
  {
    path: "redis.tls.ca_certificate_file",
    ...file,
    doc: "Extra CA certificate(s), PEM, to trust for Redis.",
  },
  {
    path: "redis.tls.certificate_file",
    ...file,
    doc: "Client certificate, PEM, for a Redis that requires one (with key_file).",
  },
  { path: "redis.tls.key_file", ...file, doc: "Client private key, PEM (with certificate_file)." },
  {
    path: "shutdown_grace_period",
    ...duration,
    default: "30s",
    doc: "On SIGTERM: how long in-flight requests and tunnel streams get to finish before they are cut.",
  },
];

/** `KAS_` + the path in upper snake case: agent.listen.address -> KAS_AGENT_LISTEN_ADDRESS. */
export function envNameOf(path: string): string {
  return `KAS_${path.replaceAll(".", "_").toUpperCase()}`;
}

export type { ListenConfig, TlsFiles } from "../../common/config/values.ts";

import type { TlsFiles } from "../../common/config/values.ts";

/** The validated configuration. Durations are milliseconds (the `Ms` suffix); files are paths, read by `readKasSecrets`. */
export interface KasConfig {
  gitlab: {
    address?: string;
    authenticationSecretFile?: string;
    caCertificateFile?: string;
    requestTimeoutMs: number;
    retryDeadlineMs: number;
  };
  agent: {
    listen: ListenConfig & {
      maxConnectionAgeMs: number;
      keepaliveIntervalMs: number;
      handshakeTimeoutMs: number;
    };
    dialTimeoutMs: number;
    staticTokensFile?: string;
    infoCacheTtlMs: number;
    infoCacheErrorTtlMs: number;
    infoCacheMaxEntries: number;
    kubernetesApi: { listen: ListenConfig; urlPathPrefix: string };
  };
  observability: {
    listen: { address: ListenAddress };
    prometheus: { urlPath: string };
    livenessProbe: { urlPath: string };
    readinessProbe: { urlPath: string };
    logging: { level: LogLevel };
  };
  api: { listen: ListenConfig & { authenticationSecretFile?: string } };
  privateApi: {
    listen: ListenConfig & { authenticationSecretFile?: string; caCertificateFile?: string };
    ownUrl?: string;
  };
  redis: {
    server: { address?: Endpoint };
    sentinel: { masterName?: string; addresses?: Endpoint[]; sentinelPasswordFile?: string };
    username?: string;
    passwordFile?: string;
    databaseIndex: number;
    keyPrefix: string;
    dialTimeoutMs: number;
    tls: TlsFiles & { enabled: boolean; caCertificateFile?: string };
  };
  shutdownGracePeriodMs: number;
}

/** The TypeScript key for a YAML key: snake_case to camelCase, durations get an `Ms` suffix. */
export function propertyNameOf(field: FieldSpec, segment: string): string {
  const camel = segment.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
  return field.kind === "duration" && segment === field.path.split(".").at(-1) ? `${camel}Ms` : camel;
}
