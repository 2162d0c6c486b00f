export { AgentToken, tokenDigest, tokenFingerprint } from "../../../tool/agent-token.ts";
export { CachedAuthenticator, type CacheOptions } from "./cached-authenticator.ts";
export { AgentAuthError, type AgentAuthErrorCode } from "./errors.ts";
export {
  type ConfiguredAuthenticator,
  createAuthenticatorFromConfig,
  createGitLabClientFromConfig,
} from "./from-config.ts";
export {
  type AuthLog,
  GitLabAuthenticator,
  type GitLabAuthenticatorOptions,
} from "./gitlab-authenticator.ts";
export {
  type AgentAuthenticateOptions,
  type AgentIdentity,
  bearerToken,
  createAgentAuthenticate,
} from "./handshake.ts";
export { createProjectAccessFromConfig } from "./project-access.ts";
export { agentTokenAccess, kubernetesProxyAccess } from "./proxy-access.ts";
export { SharedAnswerCache, type SharedAnswerCacheOptions } from "./shared-answer-cache.ts";
export {
  loadStaticTokens,
  parseStaticTokens,
  type StaticAgent,
  StaticTokenAuthenticator,
} from "./static-authenticator.ts";
export {
  MIN_RECHECK_INTERVAL_MS,
  TokenRecheck,
  type TokenRecheckOptions,
} from "./token-recheck.ts";
export type {
  AgentAuthenticator,
  AgentInfo,
  AuthenticateOptions,
  GitalyInfo,
  GitalyRepository,
} from "./types.ts";
