import { GitLabClient } from "../../../tool/gitlab/index.ts";
import type { KasConfig, KasSecrets } from "../config/index.ts";
import { CachedAuthenticator } from "./cached-authenticator.ts";
import { AgentAuthError } from "./errors.ts";
import { type AuthLog, GitLabAuthenticator } from "./gitlab-authenticator.ts";
import type { SharedAnswerCache } from "./shared-answer-cache.ts";
import { loadStaticTokens } from "./static-authenticator.ts";
import type { AgentAuthenticator, AgentInfo, AuthenticateOptions } from "./types.ts";

export interface ConfiguredAuthenticator extends AgentAuthenticator {
  /**
   * How long an answer holds, so how often connected agents' tokens are to be re-checked: the
   * cache TTL with GitLab; undefined with static tokens only (the file is read once, so their
   * answers never change).
   */
  readonly recheckIntervalMs: number | undefined;
}

/**
 * GitLab's REST client the `gitlab` section asks for (its URL, CA, timeouts; the shared secret),
 * one for all of kas: agent authentication, project access and the modules (`deps.gitlab`).
 * Undefined without gitlab.address.
 */
export function createGitLabClientFromConfig(
  config: KasConfig,
  secrets: KasSecrets,
  log?: AuthLog,
): GitLabClient | undefined {
  const { gitlab } = config;
  if (gitlab.address === undefined) return undefined;
  if (secrets.gitlabAuthSecret === undefined)
    throw new Error("gitlab.authentication_secret_file was not read");
  return new GitLabClient({
    gitlabUrl: gitlab.address,
    secret: secrets.gitlabAuthSecret,
    ...(gitlab.caCertificateFile !== undefined && { caFile: gitlab.caCertificateFile }),
    requestTimeoutMs: gitlab.requestTimeoutMs,
    retryDeadlineMs: gitlab.retryDeadlineMs,
    ...(log && { log }),
  });
}

/**
 * The authenticator the configuration asks for: static tokens (agent.static_tokens_file), GitLab
 * with a cache (gitlab.address: `gitlabClient`), or both — static tokens first, GitLab for every
 * other token. With `shared` (kas's Redis is configured), GitLab's answers are shared by the
 * replicas through it (a failed Redis call reads as a miss: the answer then comes from this
 * process's cache or GitLab).
 */
export async function createAuthenticatorFromConfig(
  config: KasConfig,
  gitlabClient: GitLabClient | undefined,
  shared?: SharedAnswerCache,
): Promise<ConfiguredAuthenticator> {
  const chain: AgentAuthenticator[] = [];
  if (config.agent.staticTokensFile !== undefined)
    chain.push(await loadStaticTokens(config.agent.staticTokensFile));
  if (gitlabClient !== undefined) {
    chain.push(
      new CachedAuthenticator(new GitLabAuthenticator(gitlabClient), {
        ttlMs: config.agent.infoCacheTtlMs,
        errorTtlMs: config.agent.infoCacheErrorTtlMs,
        maxEntries: config.agent.infoCacheMaxEntries,
        ...(shared && { shared }),
      }),
    );
  }
  if (chain.length === 0)
    throw new Error("no agent authentication configured (gitlab.address or agent.static_tokens_file)");
  return {
    recheckIntervalMs: gitlabClient === undefined ? undefined : config.agent.infoCacheTtlMs,
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
  };
}
