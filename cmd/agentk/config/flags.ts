// agentk's flags: one schema drives parsing, environment fallbacks, --help and the flags' type.
// agentk's own flags here; the modules' flags come from their folders.
import { z } from "zod";
import { kubernetesApiAgentkFlags } from "../../../modules/kubernetes_api/agentk/kube-config-source.ts";
import { observabilityAgentkFlags } from "../../../modules/observability/config.ts";
import { serviceProxyAgentkFlags } from "../../../modules/service_proxy/agentk/allowed-services.ts";
import { flag, flagsHelp } from "../../../tool/config/flags.ts";
import { parseBool, parseDuration, parseString, parseUrl, ValueError } from "../../../tool/config/values.ts";

function parseKasAddress(raw: unknown): string {
  if (typeof raw === "string" && /^grpcs?:\/\//i.test(raw)) {
    throw new ValueError(`${raw}: this agentk reaches kas over WebSocket only; use ws:// or wss://`);
  }
  return parseUrl(raw, ["ws", "wss"]);
}

/** agentk pings kas after this much quiet: under the usual 60 s idle timeout of load balancers. */
export const AGENTK_KEEPALIVE_DEFAULT = "55s";

export const agentkFlags = z.object({
  kasAddress: flag(parseKasAddress, {
    kind: "URL",
    env: "AGENTK_KAS_ADDRESS",
    doc: "kas's agent endpoint, ws:// or wss:// (required)",
  }),
  tokenFile: flag(parseString, {
    kind: "file path",
    env: "AGENTK_TOKEN_FILE",
    doc: "file holding the agent token (or the token itself in AGENTK_TOKEN)",
  }),
  caCertFile: flag(parseString, {
    kind: "file path",
    env: "AGENTK_CA_CERT_FILE",
    doc: "extra CA certificate(s), PEM, to trust for kas",
  }),
  kasHeader: flag((raw) => raw as string[], {
    kind: "header",
    env: "AGENTK_KAS_HEADERS",
    listSeparator: "\n",
    doc: '"Name: value" header for the handshake; repeatable (env: one per line)',
  }),
  kasInsecureSkipTlsVerify: flag(parseBool, {
    kind: "boolean",
    env: "AGENTK_KAS_INSECURE_SKIP_TLS_VERIFY",
    default: false,
    doc: "accept any certificate from kas (development only)",
  }),
  kasTlsServerName: flag(parseString, {
    kind: "string",
    env: "AGENTK_KAS_TLS_SERVER_NAME",
    doc: "server name expected in kas's certificate",
  }),
  keepaliveIntervalMs: flag(parseDuration, {
    kind: "duration",
    env: "AGENTK_KEEPALIVE_INTERVAL",
    default: AGENTK_KEEPALIVE_DEFAULT,
    doc: "ping kas when the tunnel has been quiet this long; below the usual 60 s idle timeout of load balancers and proxies (0s: never)",
  }),
  kubernetesApi: kubernetesApiAgentkFlags,
  serviceProxy: serviceProxyAgentkFlags,
  observability: observabilityAgentkFlags,
});

export type AgentkFlags = z.output<typeof agentkFlags>;

export function agentkHelp(): string {
  return `Usage: agentk --kas-address wss://kas.example.com --token-file /etc/agentk/token [options]

agentk, the in-cluster agent: keeps one outbound WebSocket tunnel to kas and serves, through it,
the Kubernetes API and the allow-listed in-cluster HTTP services.

Options:
${flagsHelp(agentkFlags)}
  -h, --help
      print this help and exit

Environment:
  AGENTK_TOKEN          the agent token itself (instead of --token-file)
  HTTPS_PROXY, NO_PROXY HTTP CONNECT proxy toward kas, and hosts that bypass it
  POD_NAME, POD_NAMESPACE  this pod (from the Downward API)
`;
}
