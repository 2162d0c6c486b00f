import { parseArgv } from "../../../tool/config/argv.ts";
import { envNameOf, KAS_FIELDS } from "./schema.ts";

export interface KasArgs {
  help: boolean;
  configFile?: string;
}

/** `kas [--config kas.yaml] [--help]`. Unknown flags and stray arguments are errors. */
export function parseKasArgs(argv: readonly string[]): KasArgs {
  const values = parseArgv(
    argv,
    { config: { type: "string", short: "c" }, help: { type: "boolean", short: "h" } },
    { command: "kas" },
  );
  return { help: values.help === true, ...(values.config !== undefined && { configFile: values.config }) };
}

export function kasHelp(): string {
  const rows = KAS_FIELDS.map(({ path, meta }) => {
    const env = [envNameOf(path), ...(meta.envAliases ?? [])].join(", ");
    const def = meta.default === undefined ? "" : ` (default ${JSON.stringify(meta.default)})`;
    return `  ${path}  <${meta.kind}>${def}\n      ${meta.doc}\n      env: ${env}`;
  });
  return `Usage: kas [--config kas.yaml]
       kas kubeconfig --agent-id <id> [--server <url>] [--token <token>]  (see kas kubeconfig --help)

kas, the agent server: agentk connects to it over one WebSocket; GitLab and users reach
the clusters through it.

Options:
  -c, --config <file>  YAML (or JSON) configuration file; the names are those of GitLab's kas
  -h, --help           print this help and exit

Each setting can be given in the file (nested YAML: agent.listen.address is
agent: {listen: {address: ...}}) or by the environment variable named after it, which wins.
Durations are written "300s", "1m30s", "250ms"; secret files hold 32 bytes, base64-encoded.

Settings:
${rows.join("\n")}
`;
}
