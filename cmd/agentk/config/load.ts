import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import type { AgentToken } from "../../common/agent-token.ts";
import { ConfigError, type ConfigIssue } from "../../common/config/errors.ts";
import {
  type ListenAddress,
  type LogLevel,
  parseBool,
  parseDuration,
  parseListenAddress,
  parseLogLevel,
  parseUrl,
  ValueError,
} from "../../common/config/values.ts";
import { AGENTK_FLAGS } from "./flags.ts";
import { parseKasHeaders } from "./headers.ts";
import { type KubeConfigSource, podNamespace, resolveKubeConfig, SERVICE_ACCOUNT_DIR } from "./kubernetes.ts";
import { type AllowedService, parseServiceSpec, readServicesFile } from "./services.ts";
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

type Flag = keyof typeof AGENTK_FLAGS;

/** Parses argv and the environment; `{help: true}` for --help. Throws ConfigError listing every problem. */
export async function loadAgentkConfig(options: LoadAgentkConfigOptions): Promise<AgentkArgs> {
  const env = options.env ?? process.env;
  const serviceAccountDir = options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  let values: Record<string, string | boolean | string[] | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...options.argv],
      options: {
        help: { type: "boolean", short: "h" },
        ...Object.fromEntries(
          Object.entries(AGENTK_FLAGS).map(([name, f]) => [
            name,
            { type: f.type, ...("multiple" in f && { multiple: true }) },
          ]),
        ),
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    throw new ConfigError([{ field: "arguments", message: `${(err as Error).message}; see agentk --help` }]);
  }
  if (values.help === true) return { help: true };

  const issues: ConfigIssue[] = [];
  const fail = (field: string, message: string) => void issues.push({ field, message });
  /** The flag's value, else its environment variable's, else its default; with the name to blame. */
  const get = (flag: Flag): [string | undefined, string] => {
    const spec = AGENTK_FLAGS[flag];
    const v = values[flag];
    if (typeof v === "string") return [v, `--${flag}`];
    if (env[spec.env]) return [env[spec.env], spec.env];
    return ["default" in spec ? spec.default : undefined, `--${flag}`];
  };
  const parse = <T>(flag: Flag, parser: (raw: unknown) => T): T | undefined => {
    const [raw, field] = get(flag);
    if (raw === undefined) return undefined;
    try {
      return parser(raw);
    } catch (err) {
      if (!(err instanceof ValueError)) throw err;
      fail(field, err.message);
      return undefined;
    }
  };

  const kasAddress = parse("kas-address", parseKasAddress);
  if (get("kas-address")[0] === undefined)
    fail("--kas-address", "required (or AGENTK_KAS_ADDRESS), e.g. wss://kas.gitlab.example.com");

  const token = await readToken(get("token-file"), env, fail);

  const [caCertFile, caField] = get("ca-cert-file");
  if (caCertFile !== undefined) await checkPemFile(caCertFile, caField, fail);

  const headerSpecs =
    (values["kas-header"] as string[] | undefined) ??
    env.AGENTK_KAS_HEADERS?.split("\n").filter((l) => l.trim()) ??
    [];
  const kasHeaders = parseKasHeaders(
    headerSpecs,
    values["kas-header"] ? "--kas-header" : "AGENTK_KAS_HEADERS",
    fail,
  );

  const insecure =
    values["kas-insecure-skip-tls-verify"] === true ||
    parse("kas-insecure-skip-tls-verify", parseBool) === true;
  const [serverName] = get("kas-tls-server-name");
  const keepAliveIntervalMs = parse("keepalive-interval", parseDuration);

  const kubernetes = await resolveKubeConfig(
    { flag: values.kubeconfig as string | undefined, env, serviceAccountDir },
    fail,
  );

  const services = await readServices(values, env, fail);

  const listen = parse("observability-listen-address", parseListenAddress);
  const logLevel = parse("log-level", parseLogLevel);
  const namespace = await podNamespace(env, serviceAccountDir);

  if (issues.length > 0) throw new ConfigError(issues);
  const config: AgentkConfig = {
    kasAddress: kasAddress!,
    token: token!,
    kasHeaders,
    kasInsecureSkipTlsVerify: insecure,
    keepAliveIntervalMs: keepAliveIntervalMs!,
    pod: { ...(env.POD_NAME && { name: env.POD_NAME }), ...(namespace && { namespace }) },
    kubernetes,
    services,
    observability: { listen: listen! },
    logLevel: logLevel!,
  };
  if (caCertFile !== undefined) config.caCertFile = caCertFile;
  if (serverName !== undefined) config.kasTlsServerName = serverName;
  return { help: false, config };
}

function parseKasAddress(raw: unknown): string {
  if (typeof raw === "string" && /^grpcs?:\/\//i.test(raw)) {
    throw new ValueError(`${raw}: this agentk reaches kas over WebSocket only; use ws:// or wss://`);
  }
  return parseUrl(raw, ["ws", "wss"]);
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
  values: Record<string, unknown>,
  env: NodeJS.ProcessEnv,
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
  const flagSpecs = values.service as string[] | undefined;
  const specs = flagSpecs ?? env.AGENTK_SERVICES?.split(",").filter((s) => s.trim()) ?? [];
  for (const spec of specs)
    await add(flagSpecs ? "--service" : "AGENTK_SERVICES", () => [parseServiceSpec(spec)]);
  const file = (values["services-file"] as string | undefined) ?? (env.AGENTK_SERVICES_FILE || undefined);
  if (file !== undefined)
    await add(values["services-file"] ? "--services-file" : "AGENTK_SERVICES_FILE", () =>
      readServicesFile(file),
    );
  return services;
}
