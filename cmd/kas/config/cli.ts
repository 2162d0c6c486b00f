import { parseArgv } from "../../../tool/config/argv.ts";
import { ConfigError } from "../../../tool/config/errors.ts";
import { envNameOf, KAS_FIELDS } from "./schema.ts";

export interface KasArgs {
  help: boolean;
  configFile?: string;
}

/**
 * `kas [--config kas.yaml] [--help]`; `--configuration-file` is GitLab's kas's name for `--config`,
 * so its Deployment's arguments work unchanged. Unknown flags and stray arguments are errors.
 */
export function parseKasArgs(argv: readonly string[]): KasArgs {
  const values = parseArgv(
    argv,
    {
      config: { type: "string", short: "c" },
      "configuration-file": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    { command: "kas" },
  );
  const gitlab = values["configuration-file"];
  if (values.config !== undefined && gitlab !== undefined) {
    throw new ConfigError([
      { field: "arguments", message: "give --config or --configuration-file (the same option), not both" },
    ]);
  }
  const configFile = values.config ?? gitlab;
  return { help: values.help === true, ...(configFile !== undefined && { configFile }) };
}

export function kasHelp(): string {
  const rows = KAS_FIELDS.map(({ path, meta }) => {
    const env = [envNameOf(path), ...(meta.envAliases ?? [])].join(", ");
    const def = meta.default === undefined ? "" : ` (default ${JSON.stringify(meta.default)})`;
    const unused = meta.notUsed === undefined ? "" : `\n      GitLab's, not used: ${meta.notUsed}`;
    return `  ${path}  <${meta.kind}>${def}\n      ${meta.doc}${unused}\n      env: ${env}`;
  });
  return `Usage: kas [--config kas.yaml]
       kas kubeconfig --agent-id <id> [--server <url>] [--token <token>]  (see kas kubeconfig --help)

kas, the agent server: agentk connects to it over one WebSocket; GitLab and users reach
the clusters through it.

Options:
  -c, --config <file>         YAML (or JSON) configuration file; the names are those of GitLab's kas
      --configuration-file <file>
                              the same, under GitLab's kas's name for it
  -h, --help                  print this help and exit

Each setting can be given in the file (nested YAML: agent.listen.address is
agent: {listen: {address: ...}}) or by the environment variable named after it, which wins.
Durations are written "300s", "1m30s", "250ms"; secret files hold 32 bytes, base64-encoded.

GitLab's kas configuration file loads as it is. Its settings marked "GitLab's, not used" below are
accepted and validated but change nothing here; kas logs a warning at start naming each one set.

Settings:
${rows.join("\n")}
`;
}
