import { readFile } from "node:fs/promises";
import {
  type KubeConfigSource,
  podNamespace,
  resolveKubeConfig,
  SERVICE_ACCOUNT_DIR,
} from "../../../modules/kubernetes_api/agentk/kube-config-source.ts";
import {
  type AllowedService,
  parseServiceSpec,
  readServicesFile,
} from "../../../modules/service_proxy/agentk/allowed-services.ts";
import type { AgentToken } from "../../../tool/agent-token.ts";
import { ConfigError, type ConfigIssue } from "../../../tool/config/errors.ts";
import { readFlags } from "../../../tool/config/flags.ts";
import type { ListenAddress, LogLevel } from "../../../tool/config/values.ts";
import { ValueError } from "../../../tool/config/values.ts";
import { type AgentkFlags, agentkFlags } from "./flags.ts";
import { parseKasHeaders } from "./headers.ts";
import { readToken } from "./token.ts";

export interface AgentkConfig {
  /** ws:// or wss:// URL of kas's agent listener. */
  kasAddress: string;
  /** The agent token; prints and serializes as "[REDACTED]". */
  token: AgentToken;
  /** Extra CA certificate(s), PEM, trusted for kas (added to the system roots). */
  caCertFile?: string;
  /** Extra headers sent with the WebSocket handshake (e.g. for a proxy in front of kas). */
  kasHeaders: Record<string, string>;
  kasInsecureSkipTlsVerify: boolean;
  /** TLS server name to expect from kas instead of the URL's host. */
  kasTlsServerName?: string;
  /** Ping kas after this much quiet on the tunnel, in ms (0: never). */
  keepAliveIntervalMs: number;
  pod: { name?: string; namespace?: string };
  kubernetes: KubeConfigSource;
  /** In-cluster HTTP services kas may reach by name; nothing else is reachable. */
  services: AllowedService[];
  observability: { listen: ListenAddress };
  logLevel: LogLevel;
}

export interface LoadAgentkConfigOptions {
  argv: readonly string[];
  /** Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Where a pod's service account is mounted. Default /var/run/secrets/kubernetes.io/serviceaccount. */
  serviceAccountDir?: string;
}

export type AgentkArgs = { help: true } | { help: false; config: AgentkConfig };

/** Parses argv and the environment; `{help: true}` for --help. Throws ConfigError listing every problem. */
export async function loadAgentkConfig(options: LoadAgentkConfigOptions): Promise<AgentkArgs> {
  const env = options.env ?? process.env;
  const serviceAccountDir = options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const read = readFlags(agentkFlags, options.argv, env, "agentk");
  if (read.help) return { help: true };
  const { flags, sourceOf } = read;
  const issues: ConfigIssue[] = [];
  const fail = (field: string, message: string) => void issues.push({ field, message });
  const flagIssue = (name: string) => read.issues.find((i) => i.field === sourceOf(name));
  /** A flag's own problem is reported where the flags are checked in order, after those before it. */
  const reportFlag = (name: string) => {
    const issue = flagIssue(name);
    if (issue) issues.push(issue);
  };

  reportFlag("kas-address");
  if (flags.kasAddress === undefined && !flagIssue("kas-address"))
    fail("--kas-address", "required (or AGENTK_KAS_ADDRESS), e.g. wss://kas.gitlab.example.com");

  reportFlag("token-file");
  // An empty --token-file is its own problem, not also a missing token.
  const token = flagIssue("token-file")
    ? undefined
    : await readToken([flags.tokenFile, sourceOf("token-file")], env, fail);

  reportFlag("ca-cert-file");
  if (flags.caCertFile !== undefined) await checkPemFile(flags.caCertFile, sourceOf("ca-cert-file"), fail);

  const kasHeaders = parseKasHeaders(flags.kasHeader ?? [], sourceOf("kas-header"), fail);
  for (const name of ["kas-insecure-skip-tls-verify", "kas-tls-server-name", "keepalive-interval"])
    reportFlag(name);

  reportFlag("kubeconfig");
  const kubernetes = await resolveKubeConfig(
    {
      flag: sourceOf("kubeconfig") === "--kubeconfig" ? flags.kubernetesApi.kubeconfig : undefined,
      env,
      serviceAccountDir,
    },
    fail,
  );
  reportFlag("services-file"); // --service's values are checked by readServices itself
  const services = await readServices(flags, sourceOf, fail);
  reportFlag("observability-listen-address");
  reportFlag("log-level");
  const namespace = await podNamespace(env, serviceAccountDir);
  // Any flag's own problem not reported above in its place (none may go unsaid).
  for (const issue of read.issues) if (!issues.includes(issue)) issues.push(issue);

  if (issues.length > 0) throw new ConfigError(issues);
  const config: AgentkConfig = {
    kasAddress: flags.kasAddress!,
    token: token!,
    kasHeaders,
    kasInsecureSkipTlsVerify: flags.kasInsecureSkipTlsVerify,
    keepAliveIntervalMs: flags.keepaliveIntervalMs,
    pod: { ...(env.POD_NAME && { name: env.POD_NAME }), ...(namespace && { namespace }) },
    kubernetes,
    services,
    observability: { listen: flags.observability.observabilityListenAddress },
    logLevel: flags.observability.logLevel,
  };
  if (flags.caCertFile !== undefined) config.caCertFile = flags.caCertFile;
  if (flags.kasTlsServerName !== undefined) config.kasTlsServerName = flags.kasTlsServerName;
  return { help: false, config };
}

async function checkPemFile(path: string, field: string, fail: (field: string, message: string) => void) {
  try {
    const text = await readFile(path, "utf8");
    if (!text.includes("-----BEGIN CERTIFICATE-----")) fail(field, `${path} holds no PEM certificate`);
  } catch (err) {
    fail(field, `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

async function readServices(
  flags: AgentkFlags,
  sourceOf: (flag: string) => string,
  fail: (field: string, message: string) => void,
): Promise<AllowedService[]> {
  const services: AllowedService[] = [];
  const add = (field: string, make: () => AllowedService[] | Promise<AllowedService[]>) =>
    Promise.resolve()
      .then(make)
      .then(
        (list) => {
          for (const s of list) {
            if (services.some((x) => x.name === s.name)) fail(field, `service ${s.name} is defined twice`);
            else services.push(s);
          }
        },
        (err: unknown) => {
          if (!(err instanceof ValueError)) throw err;
          fail(field, err.message);
        },
      );
  const { service, servicesFile } = flags.serviceProxy;
  for (const spec of service ?? []) await add(sourceOf("service"), () => [parseServiceSpec(spec)]);
  if (servicesFile !== undefined) await add(sourceOf("services-file"), () => readServicesFile(servicesFile));
  return services;
}
