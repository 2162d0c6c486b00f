// agentk's flags: one table drives parsing, environment fallbacks and --help.

/** The flags, each with the environment variable that stands in for it (the flag wins). */
export const AGENTK_FLAGS = {
  "kas-address": {
    type: "string",
    env: "AGENTK_KAS_ADDRESS",
    doc: "kas's agent endpoint, ws:// or wss:// (required)",
  },
  "token-file": {
    type: "string",
    env: "AGENTK_TOKEN_FILE",
    doc: "file holding the agent token (or the token itself in AGENTK_TOKEN)",
  },
  "ca-cert-file": {
    type: "string",
    env: "AGENTK_CA_CERT_FILE",
    doc: "extra CA certificate(s), PEM, to trust for kas",
  },
  "kas-header": {
    type: "string",
    multiple: true,
    env: "AGENTK_KAS_HEADERS",
    doc: '"Name: value" header for the handshake; repeatable (env: one per line)',
  },
  "kas-insecure-skip-tls-verify": {
    type: "boolean",
    env: "AGENTK_KAS_INSECURE_SKIP_TLS_VERIFY",
    doc: "accept any certificate from kas (development only)",
  },
  "kas-tls-server-name": {
    type: "string",
    env: "AGENTK_KAS_TLS_SERVER_NAME",
    doc: "server name expected in kas's certificate",
  },
  "keepalive-interval": {
    type: "string",
    env: "AGENTK_KEEPALIVE_INTERVAL",
    default: "55s",
    doc: "ping kas when the tunnel has been quiet this long; below the usual 60 s idle timeout of load balancers and proxies (0s: never)",
  },
  kubeconfig: {
    type: "string",
    env: "KUBECONFIG",
    doc: "kubeconfig file; default KUBECONFIG, then in-cluster configuration",
  },
  service: {
    type: "string",
    multiple: true,
    env: "AGENTK_SERVICES",
    doc: "in-cluster HTTP service kas may reach, name=http://host:port; repeatable (env: comma-separated)",
  },
  "services-file": {
    type: "string",
    env: "AGENTK_SERVICES_FILE",
    doc: 'YAML file "services: {name: url}" (adds to --service)',
  },
  "observability-listen-address": {
    type: "string",
    env: "AGENTK_OBSERVABILITY_LISTEN_ADDRESS",
    default: ":8080",
    doc: "metrics (/metrics) and probes (/liveness, /readiness)",
  },
  "log-level": {
    type: "string",
    env: "AGENTK_LOG_LEVEL",
    default: "info",
    doc: "trace, debug, info, warn, error",
  },
} as const;

export function agentkHelp(): string {
  const rows = Object.entries(AGENTK_FLAGS).map(([name, f]) => {
    const arg = f.type === "boolean" ? "" : " <value>";
    const def = "default" in f ? ` (default ${JSON.stringify(f.default)})` : "";
    return `  --${name}${arg}\n      ${f.doc}${def}\n      env: ${f.env}`;
  });
  return `Usage: agentk --kas-address wss://kas.example.com --token-file /etc/agentk/token [options]

agentk, the in-cluster agent: keeps one outbound WebSocket tunnel to kas and serves, through it,
the Kubernetes API and the allow-listed in-cluster HTTP services.

Options:
${rows.join("\n")}
  -h, --help
      print this help and exit

Environment:
  AGENTK_TOKEN          the agent token itself (instead of --token-file)
  HTTPS_PROXY, NO_PROXY HTTP CONNECT proxy toward kas, and hosts that bypass it
  POD_NAME, POD_NAMESPACE  this pod (from the Downward API)
`;
}
