// The module seam: what a module is, how the daemons run them, and what each daemon gives them.

export type { AgentInfo, GitalyInfo, GitalyRepository } from "./agent-info.ts";
export { type AgentStateRoute, agentStateRoute } from "./agent-route.ts";
export type {
  AgentConfiguration,
  AgentkModuleDeps,
  AgentkModuleFactory,
  HttpServices,
  LeaderElection,
} from "./agentk.ts";
export { AgentConfigurations, type ConfigurationLookup } from "./configurations.ts";
export { flat } from "./flat-string.ts";
export { announceGitPush, onGitPush, type PushedProject, pollOnGitPush, publishGitPush } from "./git-push.ts";
export { KUBERNETES_SERVICE } from "./http-services.ts";
export type {
  AgentIdentity,
  AgentRpc,
  AgentSession,
  ApiRoute,
  ApiRoutes,
  Broadcast,
  GitLabRpc,
  KasModuleDeps,
  KasModuleFactory,
  KasRedis,
  ProjectAccess,
  ProjectAccessErrorCode,
  ProjectRepository,
} from "./kas.ts";
export { ProjectAccessError } from "./kas.ts";
export {
  DEFAULT_STREAM_BACKOFF,
  followStreams,
  HEALTHY_STREAM_MS,
  type StreamBackoff,
  type StreamEndOptions,
  streamEnd,
  waitForReady,
} from "./kas-stream.ts";
export { LatestValue } from "./latest.ts";
export { type ClusterModuleSpec, clusterModule, LEADER_ONLY, leaderOnly } from "./leader.ts";
export { type Listening, listenerModule } from "./listener-module.ts";
export { type Module, type ModuleFactory, Phase } from "./module.ts";
export { PollLoop, type PollLoopOptions } from "./poll-loop.ts";
export {
  type PolledWatch,
  PollWatches,
  type PollWatchesOptions,
  type PollWatchMetrics,
} from "./poll-watches.ts";
export {
  inPipelines,
  PIPELINE_CHUNK,
  type RedisScript,
  type RedisScriptArg,
  redisScript,
} from "./redis-batch.ts";
export * from "./repositories.ts";
export {
  callingAgent,
  callSignal,
  deadlinePassed,
  positiveId,
  rpcError,
  untilStreamEnds,
} from "./rpc-call.ts";
export { ModuleCloseError, ModuleRunner } from "./runner.ts";
export {
  isGitLabId,
  type UniqueUsageCounter,
  type UsageCounter,
  type UsageData,
  type UsageRegistry,
  UsageTracker,
  type UsageTrackerOptions,
} from "./usage.ts";
export { WorkAbort } from "./work-abort.ts";
