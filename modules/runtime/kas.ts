// What kas gives its modules: the shared dependencies a kas module is built from, and the types of
// what crosses the seam (who an agent is, routes on GitLab's API front).

import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type * as grpc from "@grpc/grpc-js";
import type { Redis } from "ioredis";
import type { Registry } from "prom-client";
import type { Router } from "../../lib/router/index.ts";
import { CodedError } from "../../lib/tunnel/errors.ts";
import type { StreamDispatcher, TunnelSession } from "../../lib/tunnel/index.ts";
import type { AgentToken } from "../../tool/agent-token.ts";
import type { GitLabClient } from "../../tool/gitlab/index.ts";
import type { AgentHttpProxy } from "../../tool/http/proxy/index.ts";
import type { ConnectionLimits } from "../../tool/http/serve/index.ts";
import type { Logger, ReadinessChecks, RequestMetrics } from "../../tool/observability/index.ts";
import type { AgentInfo } from "./agent-info.ts";
import type { AgentConfigurations } from "./configurations.ts";
import type { ModuleFactory } from "./module.ts";
import type { RepositoryLocation, RepositoryReader } from "./repositories.ts";
import type { UsageRegistry } from "./usage.ts";

/** What kas knows about the agent at the other end of a tunnel (`session.identity`). */
export interface AgentIdentity extends AgentInfo {
  /** The token the agent presented; logs and JSON show "[REDACTED]". */
  token: AgentToken;
  /** The pod the agentk replica says it runs in (its handshake headers): for logs, never trusted. */
  pod?: { name?: string; namespace?: string };
}

/** A tunnel from an authenticated agent. */
export type AgentSession = TunnelSession<AgentIdentity>;

/**
 * A route on GitLab's API front (8153). The front has checked GitLab's JWT before any route runs;
 * failures (an `HttpError` for the caller's mistakes) are answered by the front's guard.
 */
export interface ApiRoute {
  /** Template for logs and metrics, never a raw path, e.g. "/api/v1/agents/{agent_id}/services/{name}/*". */
  readonly route: string;
  /** Whether this route serves `pathname` (still percent-encoded). */
  matches(pathname: string): boolean;
  handle(req: IncomingMessage, res: ServerResponse): Promise<void>;
  /** Upgrade requests; resolves with the status answered. Without it, Upgrade requests get 404. */
  upgrade?(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<number>;
}

export interface ApiRoutes {
  add(route: ApiRoute): void;
  /** Request headers (lowercase) that carry GitLab's credentials for kas: never pass them on. */
  readonly credentialHeaders: ReadonlySet<string>;
}

/**
 * The gRPC server agents call over their tunnels (one for every agent): modules add their
 * services to `server` while they are built.
 */
export interface AgentRpc {
  readonly server: grpc.Server;
  /**
   * The tunnel a call came over: who the calling agent is. Throws a gRPC UNAUTHENTICATED error
   * (`{code, details}`, ready for a handler's callback) for a call that did not come over an
   * agent's tunnel.
   */
  agentOf(call: { readonly metadata: grpc.Metadata }): AgentSession;
}

/**
 * The gRPC server GitLab calls on its API port (8153), beside the HTTP/JSON routes: modules add
 * their services while they are built. Every call has passed GitLab's JWT (`authorization: bearer`)
 * before a handler runs; handlers answer failures with a gRPC status (`rpcError`, rpc-call.ts).
 */
export interface GitLabRpc {
  /**
   * Adds a service. `protoFile` is the generated module's `protobufFileName` (the .proto under
   * proto/ that defines the service), which server reflection describes to callers.
   */
  addService(
    service: grpc.ServiceDefinition,
    implementation: grpc.UntypedServiceImplementation,
    protoFile: string,
  ): void;
}

/**
 * Messages to every kas replica (Redis pub/sub; within the process without Redis), e.g. "project P
 * was pushed to". Delivery is best effort: whoever relies on it also polls.
 */
export interface Broadcast {
  /**
   * Delivers `message` to the subscribers of `channel` at every replica: here at once, elsewhere
   * through Redis. Rejects when Redis could not take it (this replica's subscribers have it).
   */
  publish(channel: string, message: string): Promise<void>;
  /** Returns a function that unsubscribes. */
  subscribe(channel: string, onMessage: (message: string) => void): () => void;
}

/** Redis, when kas is configured with it: shared state between replicas. */
export interface KasRedis {
  /** A connection for commands (not subscribed). */
  client: Redis;
  /** Prefix for every key a module writes, e.g. "gitlab-kas:"; modules add their name. */
  keyPrefix: string;
}

/** A project an agent may read, and where its repository is. */
export interface ProjectRepository {
  /** GitLab's numeric id ("" when unknown, e.g. a local repository). */
  projectId: string;
  location: RepositoryLocation;
}

export type ProjectAccessErrorCode = "not_found" | "forbidden" | "unavailable";

/** Why an agent may not read a project, or why kas cannot tell now (`unavailable`: try again later). */
export class ProjectAccessError extends CodedError<ProjectAccessErrorCode> {
  override name = "ProjectAccessError";
}

/**
 * Which projects an agent may read (GitLab's `project_info` with the agent's token, cached; without
 * GitLab, the static tokens file's list).
 */
export interface ProjectAccess {
  /**
   * The repository of `project` (a numeric id or a full path, as agent configuration names it) if
   * the agent may read it; rejects with a ProjectAccessError otherwise.
   */
  repositoryFor(agent: AgentIdentity, project: string, signal?: AbortSignal): Promise<ProjectRepository>;
}

/** What every kas module is built from. */
export interface KasModuleDeps {
  log: Logger;
  /** Where modules register their metrics. */
  registry: Registry;
  /** kas_request_duration_seconds{route,status}, for modules that serve requests. */
  requests: RequestMetrics;
  readiness: ReadinessChecks;
  /**
   * Streams to any agent, wherever its tunnel is. `router.local` is the record of the agent
   * tunnels this replica holds (each an {@link AgentSession}); follow its events.
   */
  router: Router;
  /** HTTP to an agent's services over the router. */
  agentHttp: AgentHttpProxy;
  /** Stream kinds agents open toward kas: modules register theirs. */
  agentStreams: StreamDispatcher<AgentSession>;
  /** The gRPC server agents call (their configuration feed, reports). */
  agentRpc: AgentRpc;
  /** GitLab's API front; routes added while the modules are built are served once it starts. */
  api: ApiRoutes;
  /** The gRPC services on GitLab's API front (same port, HTTP/2). */
  gitlabRpc: GitLabRpc;
  /** Reads projects' repositories (Gitaly, or local git), rate-limited toward Gitaly. */
  repositories: RepositoryReader;
  /** Which projects an agent may read, and where they are. */
  projects: ProjectAccess;
  /** GitLab's REST API (tool/gitlab: one function per endpoint); absent without gitlab.address. */
  gitlab?: GitLabClient;
  broadcast: Broadcast;
  /** Each agent's configuration as kas read it (any replica's, through Redis when clustered). */
  configurations: AgentConfigurations;
  /** Absent in single-replica mode. */
  redis?: KasRedis;
  /** What every listener bounds its connections by (kas's connection_limits). */
  connectionLimits: ConnectionLimits;
  /** Usage counts reported to GitLab (the usage_metrics module): register them while being built. */
  usage: UsageRegistry;
}

export type KasModuleFactory = ModuleFactory<KasModuleDeps>;
