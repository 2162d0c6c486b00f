import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import { parseDocument } from "yaml";
import { ConfigError, type ConfigIssue } from "../../common/config/errors.ts";
import { type ListenAddress, ValueError } from "../../common/config/values.ts";
import { envNameOf, type FieldSpec, KAS_FIELDS, type KasConfig, propertyNameOf } from "./schema.ts";

export interface LoadKasConfigOptions {
  /** YAML (or JSON) file; without it, defaults and the environment only. */
  configFile?: string;
  /** Default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/** Reads the file, applies `KAS_*` environment overrides over it and defaults under it, validates. */
export async function loadKasConfig(options: LoadKasConfigOptions = {}): Promise<KasConfig> {
  let document: unknown = {};
  if (options.configFile !== undefined) {
    let text: string;
    try {
      text = await readFile(options.configFile, "utf8");
    } catch (err) {
      const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      throw new ConfigError([{ field: "--config", message: `cannot read ${options.configFile}: ${reason}` }]);
    }
    document = parseYaml(text, options.configFile);
  }
  return buildKasConfig(document, options.env ?? process.env, options.configFile);
}

export function parseYaml(text: string, fileName: string): unknown {
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      doc.errors.map((e) => ({ field: "--config", message: `${fileName} is not valid YAML: ${e.message}` })),
    );
  }
  return doc.toJS() ?? {};
}

/** The pure part of loading: a parsed document plus an environment in, a validated config out. */
export function buildKasConfig(
  document: unknown,
  env: NodeJS.ProcessEnv,
  fileName = "config file",
): KasConfig {
  const issues: ConfigIssue[] = [];
  const fileSource = basename(fileName);
  const fromFile = flatten(document, issues, fileSource);
  const values = new Map<string, unknown>();

  for (const field of KAS_FIELDS) {
    const [envName, envValue] = lookupEnv(field, env);
    const raw = envValue ?? fromFile.get(field.path) ?? field.default;
    if (raw === undefined || raw === null) continue;
    const source = envValue !== undefined ? envName : fromFile.has(field.path) ? fileSource : undefined;
    try {
      values.set(field.path, field.parse(raw));
    } catch (err) {
      if (!(err instanceof ValueError)) throw err;
      issues.push({ field: field.path, message: err.message, source: source ?? "default" });
    }
  }
  checkCombinations(values, issues);
  if (issues.length > 0) throw new ConfigError(issues);
  return assemble(values) as unknown as KasConfig;
}

/** The first of KAS_<PATH> and the field's aliases that is set to something non-empty. */
function lookupEnv(field: FieldSpec, env: NodeJS.ProcessEnv): [string, string | undefined] {
  for (const name of [envNameOf(field.path), ...(field.envAliases ?? [])]) {
    const value = env[name];
    if (value !== undefined && value !== "") return [name, value];
  }
  return ["", undefined];
}

const KNOWN = new Set(KAS_FIELDS.map((f) => f.path));
const SECTIONS = new Set(
  KAS_FIELDS.flatMap((f) =>
    f.path
      .split(".")
      .slice(0, -1)
      .map((_, i, a) => a.slice(0, i + 1).join(".")),
  ),
);

/** Dotted path -> value for every leaf of the document; unknown keys and misplaced scalars are issues. */
function flatten(document: unknown, issues: ConfigIssue[], source: string): Map<string, unknown> {
  const out = new Map<string, unknown>();
  const walk = (node: unknown, prefix: string) => {
    if (!isMapping(node)) {
      issues.push({ field: prefix || "(top level)", message: "expected a mapping", source });
      return;
    }
    for (const [key, value] of Object.entries(node)) {
      const path = prefix ? `${prefix}.${key}` : key;
      if (KNOWN.has(path)) out.set(path, value);
      else if (SECTIONS.has(path)) {
        if (value !== null) walk(value, path);
      } else issues.push({ field: path, message: "unknown field", source });
    }
  };
  walk(document, "");
  return out;
}

function isMapping(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function checkCombinations(values: Map<string, unknown>, issues: ConfigIssue[]): void {
  const has = (path: string) => values.has(path);
  if (!has("gitlab.address") && !has("agent.static_tokens_file")) {
    issues.push({
      field: "gitlab.address",
      message: "required (or set agent.static_tokens_file to authenticate agents without GitLab)",
    });
  }
  if (has("gitlab.address") && !has("gitlab.authentication_secret_file")) {
    issues.push({
      field: "gitlab.authentication_secret_file",
      message: "required when gitlab.address is set",
    });
  }
  const sentinel = has("redis.sentinel.master_name") || has("redis.sentinel.addresses");
  if (has("redis.sentinel.master_name") !== has("redis.sentinel.addresses")) {
    const missing = has("redis.sentinel.master_name") ? "addresses" : "master_name";
    issues.push({
      field: `redis.sentinel.${missing}`,
      message: "required: master_name and addresses go together",
    });
  }
  if (sentinel && has("redis.server.address")) {
    issues.push({
      field: "redis.sentinel",
      message: "set either redis.server.address or redis.sentinel, not both",
    });
  }
  const clustered = has("redis.server.address") || sentinel;
  if (clustered && !has("private_api.listen.authentication_secret_file")) {
    issues.push({
      field: "private_api.listen.authentication_secret_file",
      message: "required when Redis is configured (kas replicas authenticate each other with it)",
    });
  }
  // Peers dial the URL a replica advertises in Redis; a bind-all address is not one they can dial.
  const privateListen = values.get("private_api.listen.address") as ListenAddress | undefined;
  if (clustered && !has("private_api.own_url") && privateListen && anyHost(privateListen.host)) {
    issues.push({
      field: "private_api.own_url",
      message:
        `required when Redis is configured and private_api.listen.address binds every interface ` +
        `(port ${privateListen.port}): other replicas cannot dial that; set the URL they reach this one at, ` +
        `e.g. ws://<pod IP>:${privateListen.port} (or OWN_PRIVATE_API_URL)`,
    });
  }
  const ownUrl = values.get("private_api.own_url") as string | undefined;
  if (has("private_api.listen.certificate_file") && ownUrl !== undefined && /^(ws|http):/.test(ownUrl)) {
    issues.push({
      field: "private_api.own_url",
      message:
        "must be wss:// or https:// when the private API serves TLS (private_api.listen.certificate_file)",
    });
  }
  const tlsPairs = [
    "agent.listen",
    "agent.kubernetes_api.listen",
    "api.listen",
    "private_api.listen",
    "redis.tls",
  ];
  for (const listener of tlsPairs) {
    if (has(`${listener}.certificate_file`) !== has(`${listener}.key_file`)) {
      const missing = has(`${listener}.certificate_file`) ? "key_file" : "certificate_file";
      issues.push({
        field: `${listener}.${missing}`,
        message: "required: certificate_file and key_file go together",
      });
    }
  }
  // Two listeners on one port would fail at bind time with a less helpful message.
  const listeners: { path: string; host: string | undefined; port: number }[] = [];
  for (const field of KAS_FIELDS) {
    if (!field.path.endsWith(".listen.address") || !values.has(field.path)) continue;
    const { host, port } = values.get(field.path) as { host: string | undefined; port: number };
    const clash = listeners.find(
      (l) => port !== 0 && l.port === port && (anyHost(l.host) || anyHost(host) || l.host === host),
    );
    if (clash) issues.push({ field: field.path, message: `port ${port} is already used by ${clash.path}` });
    listeners.push({ path: field.path, host, port });
  }
  if (values.get("gitlab.retry_deadline") !== undefined) {
    const deadline = values.get("gitlab.retry_deadline") as number;
    const timeout = values.get("agent.listen.handshake_timeout") as number;
    if (deadline >= timeout) {
      issues.push({
        field: "gitlab.retry_deadline",
        message: `must be shorter than agent.listen.handshake_timeout (${timeout} ms)`,
      });
    }
  }
}

function anyHost(host: string | undefined): boolean {
  return host === undefined || host === "0.0.0.0" || host === "::";
}

/** Nests the flat values under camelCase keys; every section exists even when all its fields are unset. */
function assemble(values: Map<string, unknown>): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const field of KAS_FIELDS) {
    const segments = field.path.split(".");
    let node = root;
    for (const segment of segments.slice(0, -1)) {
      const key = propertyNameOf(field, segment);
      node[key] ??= {};
      node = node[key] as Record<string, unknown>;
    }
    if (values.has(field.path)) node[propertyNameOf(field, segments.at(-1)!)] = values.get(field.path);
  }
  return root;
}
