// `kas kubeconfig --agent-id N`: a kubeconfig for the agent's cluster through this kas's Kubernetes
// API proxy, ready for kubectl: the proxy's URL, the CA kas made for it (data_dir), and a token
// (the agent's static dev token, or the one given: ci:N:<job token>, pat:N:<personal access token>).
import { KubeconfigError, proxyKubeconfig } from "../../modules/kubernetes_api/kas/kubeconfig.ts";
import { kasDataDir } from "../../modules/kubernetes_api/kas/listener-tls.ts";
import { parseArgv } from "../../tool/config/argv.ts";
import { staticTokenFor } from "./auth/static-authenticator.ts";
import { ConfigError, type KasConfig, loadKasConfig } from "./config/index.ts";

export const KUBECONFIG_HELP = `Usage: kas kubeconfig --agent-id <id> [--server <url>] [--token <token>] [--config kas.yaml]

Prints a kubeconfig for agent <id>'s cluster through this kas's Kubernetes API proxy
(agent.kubernetes_api): KUBECONFIG=<file> kubectl get pods.

Options:
  --agent-id <id>   the agent (required)
  --server <url>    the proxy's URL as kubectl reaches it (default: from agent.kubernetes_api.listen.address)
  --token <token>   default: the agent's token in agent.static_tokens_file; with GitLab,
                    ci:<id>:<CI job token> or pat:<id>:<personal access token>
  -c, --config      kas's configuration file (the environment applies as for kas itself)
`;

export interface KubeconfigArgs {
  agentId: string;
  server?: string;
  token?: string;
  configFile?: string;
}

function usage(message: string): ConfigError {
  return new ConfigError([{ field: "kas kubeconfig", message: `${message}; see kas kubeconfig --help` }]);
}

/** undefined for --help. */
export function parseKubeconfigArgs(argv: readonly string[]): KubeconfigArgs | undefined {
  const values = parseArgv(
    argv,
    {
      "agent-id": { type: "string" },
      server: { type: "string" },
      token: { type: "string" },
      config: { type: "string", short: "c" },
      help: { type: "boolean", short: "h" },
    },
    { command: "kas kubeconfig", field: "kas kubeconfig" },
  );
  if (values.help) return undefined;
  const agentId = values["agent-id"];
  if (typeof agentId !== "string" || !/^[1-9]\d{0,18}$/.test(agentId))
    throw usage("--agent-id: expected a positive integer");
  return {
    agentId,
    ...(typeof values.server === "string" && { server: values.server }),
    ...(typeof values.token === "string" && { token: values.token }),
    ...(typeof values.config === "string" && { configFile: values.config }),
  };
}

/** The kubeconfig's YAML (the same as GitLab's API answers: proxyKubeconfig). */
export async function kubeconfigFor(args: KubeconfigArgs, config: KasConfig): Promise<string> {
  const file = config.agent.staticTokensFile;
  const token = args.token ?? (file === undefined ? undefined : await staticTokenFor(file, args.agentId));
  if (token === undefined)
    throw usage(
      `agent ${args.agentId} has no token in agent.static_tokens_file: give --token (ci:${args.agentId}:<CI job token> or pat:${args.agentId}:<personal access token>)`,
    );
  try {
    return await proxyKubeconfig({
      agentId: args.agentId,
      token,
      ...(args.server !== undefined && { server: args.server }),
      config: config.agent.kubernetesApi,
      dataDir: kasDataDir(config.dataDir),
    });
  } catch (err) {
    if (err instanceof KubeconfigError) throw usage(`${err.message}: give --${err.missing}`);
    throw err;
  }
}

/** The subcommand: 0 printed, 2 bad usage or configuration. */
export async function kubeconfigMain(argv: readonly string[]): Promise<number> {
  try {
    const args = parseKubeconfigArgs(argv);
    if (args === undefined) {
      process.stdout.write(KUBECONFIG_HELP);
      return 0;
    }
    const config = await loadKasConfig(args.configFile === undefined ? {} : { configFile: args.configFile });
    process.stdout.write(await kubeconfigFor(args, config));
    return 0;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`kas kubeconfig:\n${err.message.replace(/^/gm, "  ")}\n`);
    return 2;
  }
}
