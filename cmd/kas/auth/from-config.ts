import type { KasConfig, KasSecrets } from "../config/index.ts";
import { CachedAuthenticator } from "./cached-authenticator.ts";
import { AgentAuthError } from "./errors.ts";
import { type AuthLog, GitLabAuthenticator, gitlabClientOptions } from "./gitlab-authenticator.ts";
import { loadStaticTokens } from "./static-authenticator.ts";
import type { AgentAuthenticator, AgentInfo, AuthenticateOptions } from "./types.ts";

export interface ConfiguredAuthenticator extends AgentAuthenticator {
  /**
   * How long an answer holds, so how often connected agents' tokens are to be re-checked: the
   * cache TTL with GitLab; undefined with static tokens only (the file is read once, so their
   * answers never change).
   */
  readonly recheckIntervalMs: number | undefined;
  close(): Promise<void>;
}

/**
 * The authenticator the configuration asks for: static tokens (agent.static_tokens_file), GitLab
 * with a cache (gitlab.address), or both — static tokens first, GitLab for every other token.
 */
export async function createAuthenticatorFromConfig(
  config: KasConfig,
  secrets: KasSecrets,
  log?: AuthLog,
): Promise<ConfiguredAuthenticator> {
  const chain: AgentAuthenticator[] = [];
  let gitlab: GitLabAuthenticator | undefined;
  if (config.agent.staticTokensFile !== undefined)
    chain.push(await loadStaticTokens(config.agent.staticTokensFile));
  if (config.gitlab.address !== undefined) {
    if (secrets.gitlabAuthSecret === undefined)
      throw new Error("gitlab.authentication_secret_file was not read");
    gitlab = new GitLabAuthenticator(
      gitlabClientOptions(
        { ...config.gitlab, address: config.gitlab.address },
        secrets.gitlabAuthSecret,
        log,
      ),
    );
    chain.push(
      new CachedAuthenticator(gitlab, {
        ttlMs: config.agent.infoCacheTtlMs,
        errorTtlMs: config.agent.infoCacheErrorTtlMs,
        maxEntries: config.agent.infoCacheMaxEntries,
      }),
    );
  }
  if (chain.length === 0)
    throw new Error("no agent authentication configured (gitlab.address or agent.static_tokens_file)");
  return {
    recheckIntervalMs: gitlab === undefined ? undefined : config.agent.infoCacheTtlMs,
    async authenticateAgent(token: string, options?: AuthenticateOptions): Promise<AgentInfo> {
      for (const [i, authenticator] of chain.entries()) {
        try {
          return await authenticator.authenticateAgent(token, options);
        } catch (err) {
          const last = i === chain.length - 1;
          if (last || !(err instanceof AgentAuthError) || err.code !== "unauthenticated") throw err;
        }
      }
      throw new AgentAuthError("unauthenticated", "agent token is invalid or revoked");
    },
    close: async () => gitlab?.close(),
  };
}
