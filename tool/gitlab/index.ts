export {
  AGENT_CONFIGURATION_PATH,
  parseAgentConfigurationResponse,
  postAgentConfiguration,
} from "./agent-configuration.ts";
export {
  AGENT_INFO_PATH,
  type AgentInfoResponse,
  type GitalyInfo,
  type GitalyRepository,
  getAgentInfo,
  parseAgentInfoResponse,
} from "./agent-info.ts";
export {
  ALLOWED_AGENTS_PATH,
  type AllowedAgent,
  type AllowedAgentsForJob,
  type CiAccessAs,
  getAllowedAgentsForJob,
  type ImpersonateConfig,
  parseAllowedAgentsResponse,
} from "./allowed-agents.ts";
export {
  AnswerCache,
  type AnswerCacheOptions,
  type LazySignal,
  signalOf,
  untilAborted,
} from "./answer-cache.ts";
export {
  AUTHORIZE_PROXY_USER_PATH,
  authorizeProxyUser,
  type ProxyUserAuthorization,
  type ProxyUserRequest,
  parseAuthorizeProxyUserResponse,
  type RoleAccess,
  type UserAccessType,
} from "./authorize-proxy-user.ts";
export {
  agentTokenHeaders,
  GitLabClient,
  type GitLabClientOptions,
  type GitLabLog,
  type GitLabRefusals,
  type GitLabRequest,
} from "./client.ts";
export { GitLabError, type GitLabErrorKind } from "./errors.ts";
export {
  KAS_API_REQUEST_HEADER,
  KAS_JWT_AUDIENCE,
  KAS_JWT_ISSUER,
  type KasJwtOptions,
  signKasApiJwt,
} from "./kas-jwt.ts";
export {
  getProjectInfo,
  PROJECT_INFO_PATH,
  type ProjectInfoResponse,
  parseProjectInfoResponse,
} from "./project-info.ts";
export { Reader } from "./reader.ts";
export {
  parseUsageMetricsResponse,
  postUsageMetrics,
  USAGE_METRICS_PATH,
  type UsageMetrics,
  usageMetricsBody,
} from "./usage-metrics.ts";
