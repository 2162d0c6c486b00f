export { AgentToken, tokenDigest, tokenFingerprint } from "../../../tool/agent-token.ts";
export { parseAgentInfoResponse } from "./agent-info.ts";
export { CachedAuthenticator, type CacheOptions } from "./cached-authenticator.ts";
export { AgentAuthError, type AgentAuthErrorCode } from "./errors.ts";
export { type ConfiguredAuthenticator, createAuthenticatorFromConfig } from "./from-config.ts";
export {
  AGENT_INFO_PATH,
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
export {
  KAS_API_REQUEST_HEADER,
  KAS_JWT_AUDIENCE,
  KAS_JWT_ISSUER,
  type KasJwtOptions,
  signKasApiJwt,
} from "./kas-jwt.ts";
export { agentTokenAccess, type ConfiguredProxyAccess, kubernetesProxyAccess } from "./proxy-access.ts";
export { GitLabProxyAuthorization } from "./proxy-gitlab.ts";
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
