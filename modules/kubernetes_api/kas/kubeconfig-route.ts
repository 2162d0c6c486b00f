// GitLab's API: `GET /api/v1/agents/{agent_id}/kubeconfig[?server=<url>]` answers the kubeconfig
// `kas kubeconfig --agent-id N` prints (the same function), with the agent's static dev token.
import { HttpError, requestTarget } from "../../../tool/http/serve/index.ts";
import type { ApiRoute } from "../../runtime/index.ts";
import type { KubernetesApiConfig } from "./config.ts";
import { KubeconfigError, proxyKubeconfig } from "./kubeconfig.ts";

export const KUBECONFIG_ROUTE = "/api/v1/agents/{agent_id}/kubeconfig";
const KUBECONFIG_PATH = /^\/api\/v1\/agents\/([^/]+)\/kubeconfig\/?$/;

export interface KubeconfigRouteOptions {
  /** The proxy's configuration; `listen.address.port` is the bound one once the proxy listens. */
  config: () => KubernetesApiConfig;
  dataDir: string;
  /** The agent's static dev token, if it has one (agent.static_tokens_file). */
  staticTokenOf?: (agentId: string) => Promise<string | undefined>;
}

export function kubeconfigRoute(o: KubeconfigRouteOptions): ApiRoute {
  return {
    route: KUBECONFIG_ROUTE,
    matches: (pathname) => KUBECONFIG_PATH.test(pathname),
    async handle(req, res) {
      if (req.method !== "GET" && req.method !== "HEAD") {
        throw new HttpError(405, "only GET is allowed here", { allow: "GET, HEAD" });
      }
      const { pathname, query } = requestTarget(req);
      const agentId = KUBECONFIG_PATH.exec(pathname)![1]!;
      if (!/^[1-9]\d{0,18}$/.test(agentId)) throw new HttpError(400, "agent_id must be a positive integer");
      const server = query.get("server") ?? undefined;
      if (server !== undefined && !/^https?:\/\/[^/]/.test(server))
        throw new HttpError(400, "server must be an http:// or https:// URL");
      const token = await o.staticTokenOf?.(agentId);
      if (token === undefined) {
        throw new HttpError(
          404,
          `agent ${agentId} has no token in agent.static_tokens_file (for a CI job's or a user's token: kas kubeconfig --token)`,
        );
      }
      let yaml: string;
      try {
        yaml = await proxyKubeconfig({
          agentId,
          token,
          ...(server !== undefined && { server }),
          config: o.config(),
          dataDir: o.dataDir,
        });
      } catch (err) {
        if (err instanceof KubeconfigError) throw new HttpError(400, `${err.message}: give ?${err.missing}=`);
        throw err;
      }
      // It holds a credential: never cached on the way.
      res.writeHead(200, { "content-type": "application/yaml", "cache-control": "no-store" });
      res.end(req.method === "HEAD" ? undefined : yaml);
    },
  };
}
