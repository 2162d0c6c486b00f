// A stand-in for GitLab's internal API as kas uses it, speaking the real wire protocol:
// GET /api/v4/internal/kubernetes/agent_info (and project_info?id=<id or full path>, the projects
// an agent may read) with `Authorization: Bearer <agent token>` and kas's
// HS256 JWT in `Gitlab-Kas-Api-Request` (iss gitlab-kas, aud gitlab), answered with GitLab's JSON
// field names and GitLab's error bodies. The JWT is verified in full with jose, as Rails does.
// For the Kubernetes API proxy: a CI job's GET /api/v4/job/allowed_agents (header `Job-Token`,
// no kas JWT needed: it is GitLab's public API) and a user's
// POST /api/v4/internal/kubernetes/authorize_proxy_user ({agent_id, access_type, access_key, csrf_token}).
// Both answer as Rails does, from GitLab's copy of each agent's ci_access / user_access, which only
// kas's POST /api/v4/internal/kubernetes/agent_configuration sets (gitlab/agent-authorizations.ts),
// over the groups, projects, users and memberships a test declares (gitlab/namespaces.ts).
// POST /api/v4/internal/kubernetes/usage_metrics is read as Rails reads it and recorded.
import { EventEmitter, once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { jwtVerify } from "jose";
import { AgentAuthorizations } from "./gitlab/agent-authorizations.ts";
import { allowedAgentsBody } from "./gitlab/allowed-agents-body.ts";
import { environmentSlug } from "./gitlab/environment-slug.ts";
import { type Group, Namespaces, type Project, type Role, type User } from "./gitlab/namespaces.ts";
import { readBody } from "./gitlab/read-body.ts";
import { GitLabUsageMetrics, USAGE_METRICS_PATH, type UsageMetrics } from "./gitlab/usage-metrics.ts";

export type { AllowedAgentsAnswer } from "./gitlab/allowed-agents-body.ts";
export type { UsageMetrics };
export { allowedAgentsBody, USAGE_METRICS_PATH };

export interface TestAgent {
  agentId: number;
  projectId: number;
  agentName: string;
  /** Default "group/project-<projectId>". */
  projectPath?: string;
  /** Default "main". */
  defaultBranch?: string;
  /** Default "tcp://127.0.0.1:8075". */
  gitalyAddress?: string;
  /** Default "gitaly-secret-token" (kas must never log it). */
  gitalyToken?: string;
}

/** A project `project_info` answers for, by numeric id or full path. */
export interface TestProject {
  projectId: number;
  /** Full path, e.g. "group/manifests". */
  path: string;
  /** Default "main". */
  defaultBranch?: string;
  /** Default "tcp://127.0.0.1:8075". */
  gitalyAddress?: string;
  /** Default "gitaly-secret-token". */
  gitalyToken?: string;
  /** Agent tokens that may read it (others get 403). Default: every known agent. */
  readers?: string[];
}

/** How to answer the next agent_info requests instead of normally. */
export type Fault =
  | { status: number; body?: string }
  /** 200 with a body that is not JSON. */
  | "malformed-json"
  /** 200 with JSON of the wrong shape (agent_id missing). */
  | "wrong-shape"
  /** Never answer (until the server closes). */
  | "hang";

/**
 * A CI job `allowed_agents` answers for, by its job token. Which agents it may use is GitLab's to
 * work out, from the configurations kas posted (see AgentAuthorizations).
 */
export interface TestJob {
  jobId: number;
  pipelineId: number;
  /** The job's project: one GitLab knows (addProject, or an agent's configuration project). */
  projectId: number;
  /** The job's user (GitLab's current_user for the job token). */
  user: User;
  /**
   * The job's environment: `name` is what ci_access `environments` match (as Rails filters); GitLab
   * answers its slug (made from the name as Rails makes it) and `tier`.
   */
  environment?: { name: string; tier: string };
  /** Whether the job's pipeline runs for a protected branch or tag (Rails' `pipeline.protected_ref?`). Default false. */
  protectedRef?: boolean;
}

/**
 * A user's credential `authorize_proxy_user` takes: a personal access token or a session cookie
 * (with its CSRF token). What the user may do is GitLab's to work out: their memberships (addMember)
 * and the agent's user_access as kas posted it.
 */
export interface TestProxyUser extends User {
  accessType: "personal_access_token" | "session_cookie";
  /** With session_cookie: the CSRF token of the session. */
  csrfToken?: string;
}

export interface RecordedRequest {
  method: string;
  path: string;
  /** The bearer token presented, if any (tests assert on it; never log it in product code). */
  agentToken: string | undefined;
  /** The `Job-Token` header, if any. */
  jobToken?: string;
  /** A JSON request body, if any. */
  body?: unknown;
  /** The User-Agent header. */
  userAgent?: string;
  /** Whether the Gitlab-Kas-Api-Request JWT verified; the reason otherwise. */
  jwt: { ok: true; claims: Record<string, unknown> } | { ok: false; reason: string };
  status: number;
}

export const AGENT_INFO_PATH = "/api/v4/internal/kubernetes/agent_info";
export const PROJECT_INFO_PATH = "/api/v4/internal/kubernetes/project_info";
export const ALLOWED_AGENTS_PATH = "/api/v4/job/allowed_agents";
export const AUTHORIZE_PROXY_USER_PATH = "/api/v4/internal/kubernetes/authorize_proxy_user";
export const AGENT_CONFIGURATION_PATH = "/api/v4/internal/kubernetes/agent_configuration";

/** An agent_configuration POST GitLab took (204): the agent and its config.yaml as kas sent it. */
export interface PostedConfiguration {
  agentId: number;
  agentConfig: Record<string, unknown>;
}

export class GitLabApiServer {
  readonly #server: Server;
  readonly #secret: Uint8Array;
  readonly #agents = new Map<string, TestAgent>();
  readonly #projects: TestProject[] = [];
  readonly #jobs = new Map<string, TestJob>();
  readonly #users = new Map<string, TestProxyUser>();
  readonly #namespaces = new Namespaces();
  readonly #authorizations = new AgentAuthorizations(this.#namespaces);
  readonly #refusals = new Map<string, 403 | 404>();
  readonly #faults: Fault[] = [];
  readonly #postFaults: number[] = [];
  /** Every agent_configuration POST GitLab took, in order. */
  readonly postedConfigurations: PostedConfiguration[] = [];
  readonly #hanging = new Set<ServerResponse>();
  readonly requests: RecordedRequest[] = [];
  /** usage_metrics: its reports, and its faults (gitlab/usage-metrics.ts). */
  readonly usageMetrics = new GitLabUsageMetrics();
  readonly #prefix: string;
  readonly #events = new EventEmitter();
  url = "";

  private constructor(secret: Uint8Array, prefix: string) {
    this.#secret = secret;
    this.#prefix = prefix;
    this.#server = createServer((req, res) => void this.#handle(req, res));
  }

  /** Listens on 127.0.0.1. `pathPrefix` mounts the API under a relative URL root, e.g. "/gitlab". */
  static async start(options: {
    secret: Uint8Array;
    agents?: Record<string, TestAgent>;
    projects?: TestProject[];
    pathPrefix?: string;
  }): Promise<GitLabApiServer> {
    const api = new GitLabApiServer(options.secret, options.pathPrefix ?? "");
    for (const [token, agent] of Object.entries(options.agents ?? {})) api.addAgent(token, agent);
    for (const project of options.projects ?? []) api.addProject(project);
    await new Promise<void>((resolve) => api.#server.listen(0, "127.0.0.1", resolve));
    const { port } = api.#server.address() as AddressInfo;
    api.url = `http://127.0.0.1:${port}${api.#prefix}`;
    return api;
  }

  /** An agent and its token; its configuration project joins GitLab's projects. */
  addAgent(token: string, agent: TestAgent): void {
    const project = this.#namespaces.addProject(agent.projectId, agentProjectPath(agent));
    this.#authorizations.addAgent({ id: agent.agentId, name: agent.agentName, project });
    this.#agents.set(token, agent);
  }

  /** A project GitLab knows: `project_info` answers for it (by id and by full path); its groups are created as needed. */
  addProject(project: TestProject): Project {
    const known = this.#namespaces.addProject(project.projectId, project.path);
    this.#projects.push(project);
    return known;
  }

  /** A group at `path` (parents created as needed, with ids of their own). */
  addGroup(group: { id: number; path: string }): Group {
    return this.#namespaces.addGroup(group.path, group.id);
  }

  /** A user (one-segment project paths equal to the username are their personal namespace). */
  addUser(user: User): void {
    this.#namespaces.addUser(user);
  }

  /** A direct membership of a known user in a project or group (by id), with the role. */
  addMember(userId: number, of: { projectId: number } | { groupId: number }, role: Role): void {
    this.#namespaces.addMember(userId, of, role);
  }

  /** A CI job: `allowed_agents` with this `Job-Token` answers for it (others 401). */
  addJob(jobToken: string, job: TestJob): void {
    if (this.#namespaces.project(job.projectId) === undefined)
      throw new Error(`job ${job.jobId}: GitLab knows no project ${job.projectId}`);
    this.#namespaces.addUser(job.user);
    this.#jobs.set(jobToken, job);
  }

  /** A user's credential: `authorize_proxy_user` with this access key answers for them (others 401). */
  addProxyUser(accessKey: string, user: TestProxyUser): void {
    this.#namespaces.addUser({ id: user.id, username: user.username });
    this.#users.set(accessKey, user);
  }

  /**
   * What an agent_configuration POST GitLab takes does (for tests that run no kas configuration
   * module): records it in `postedConfigurations` and refreshes the agent's authorizations from it.
   * Throws for an agent GitLab does not know (the POST's 404).
   */
  takeConfiguration(agentId: number, agentConfig: Record<string, unknown>): void {
    if (this.#authorizations.agent(agentId) === undefined)
      throw new Error(`GitLab knows no agent ${agentId}`);
    this.postedConfigurations.push({ agentId, agentConfig });
    this.#authorizations.updateConfiguration(agentId, agentConfig);
    this.#events.emit("configuration");
  }

  /** Resolves once `count` configurations have been taken in all; rejects after `timeoutMs`. */
  async waitForConfigurations(count: number, timeoutMs = 10_000): Promise<PostedConfiguration> {
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      while (this.postedConfigurations.length < count) await once(this.#events, "configuration", { signal });
    } catch (err) {
      if (!signal.aborted) throw err;
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for agent configuration post #${count} (${this.postedConfigurations.length} taken)`,
      );
    }
    return this.postedConfigurations[count - 1]!;
  }

  /** Requests to the Kubernetes API proxy's two endpoints (allowed_agents, authorize_proxy_user) so far. */
  get proxyAuthRequests(): number {
    return this.requests.filter((r) => r.path === ALLOWED_AGENTS_PATH || r.path === AUTHORIZE_PROXY_USER_PATH)
      .length;
  }

  /** project_info requests received so far. */
  get projectInfoRequests(): number {
    return this.requests.filter((r) => r.path === PROJECT_INFO_PATH).length;
  }

  /** The token is revoked: GitLab no longer knows it (401). */
  removeAgent(token: string): void {
    this.#agents.delete(token);
  }

  /** The token is known but GitLab refuses it (403) or its agent is gone (404). */
  refuse(token: string, status: 403 | 404): void {
    this.#refusals.set(token, status);
  }

  /** The next `faults.length` agent_info requests get these answers, in order. */
  failNext(...faults: Fault[]): void {
    this.#faults.push(...faults);
  }

  /** The next `statuses.length` agent_configuration POSTs are answered with these statuses, in order. */
  failNextConfigurationPosts(...statuses: number[]): void {
    this.#postFaults.push(...statuses);
  }

  /** agent_configuration POSTs received so far (taken or not). */
  get configurationPosts(): RecordedRequest[] {
    return this.requests.filter((r) => r.path === AGENT_CONFIGURATION_PATH);
  }

  /** Forgets the faults not used yet. */
  clearFaults(): void {
    this.#faults.length = 0;
  }

  /** agent_info requests received so far. */
  get agentInfoRequests(): number {
    return this.requests.filter((r) => r.path === AGENT_INFO_PATH).length;
  }

  /** Resolves once `count` requests (of any kind) have arrived; rejects after `timeoutMs`. */
  async waitForRequests(count: number, timeoutMs = 5000): Promise<void> {
    const signal = AbortSignal.timeout(timeoutMs);
    while (this.requests.length < count) await once(this.#events, "request", { signal });
  }

  async close(): Promise<void> {
    for (const res of this.#hanging) res.destroy();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://gitlab");
    const path = url.pathname.startsWith(this.#prefix)
      ? url.pathname.slice(this.#prefix.length)
      : url.pathname;
    const auth = req.headers.authorization;
    const agentToken = typeof auth === "string" ? /^Bearer (.+)$/i.exec(auth)?.[1] : undefined;
    const jwt = await this.#verifyJwt(req.headers["gitlab-kas-api-request"]);
    const jobToken = req.headers["job-token"];
    const userAgent = req.headers["user-agent"];
    const record: RecordedRequest = {
      method: req.method ?? "",
      path,
      agentToken,
      ...(userAgent !== undefined && { userAgent }),
      ...(typeof jobToken === "string" && { jobToken }),
      jwt,
      status: 0,
    };
    this.requests.push(record);
    this.#events.emit("request");
    if (path === USAGE_METRICS_PATH) return this.usageMetrics.handle(req, res, jwt.ok, record);
    const reply = (status: number, body: unknown, raw = false) => {
      record.status = status;
      const text = raw ? String(body) : JSON.stringify(body);
      res.writeHead(status, { "content-type": "application/json" }).end(text);
    };

    const posts = [AUTHORIZE_PROXY_USER_PATH, AGENT_CONFIGURATION_PATH];
    const known = [AGENT_INFO_PATH, PROJECT_INFO_PATH, ALLOWED_AGENTS_PATH, ...posts];
    if (!known.includes(path)) return reply(404, { message: "404 Not Found" });
    const method = posts.includes(path) ? "POST" : "GET";
    if (req.method !== method) return reply(405, { message: "405 Method Not Allowed" });
    // Rails checks kas's JWT before anything else on its internal API (allowed_agents is public).
    if (!jwt.ok && path !== ALLOWED_AGENTS_PATH)
      return reply(401, { message: "KAS JWT authentication invalid" });
    if (posts.includes(path)) {
      try {
        record.body = JSON.parse(await readBody(req, 1 << 16));
      } catch {
        return reply(400, { error: "body is not JSON" });
      }
    }
    // Their own faults: agent_info's (failNext) must not be taken by a post running beside it.
    if (path === AGENT_CONFIGURATION_PATH) return this.#agentConfiguration(record, reply);
    const fault = this.#faults.shift();
    if (fault === "hang") {
      this.#hanging.add(res);
      return;
    }
    if (fault === "malformed-json") return reply(200, "{not json", true);
    if (typeof fault === "object")
      return reply(
        fault.status,
        fault.body ?? { message: `${fault.status} fault` },
        typeof fault.body === "string",
      );
    if (path === ALLOWED_AGENTS_PATH) {
      const job = typeof jobToken === "string" ? this.#jobs.get(jobToken) : undefined;
      if (job === undefined) return reply(401, { message: "401 Unauthorized" });
      return reply(200, allowedAgentsBody(this.#allowedAgents(job)));
    }
    if (path === AUTHORIZE_PROXY_USER_PATH) return reply(...this.#authorizeProxyUser(record.body));
    const agent = agentToken === undefined ? undefined : this.#agents.get(agentToken);
    if (agent === undefined) return reply(401, { message: "401 Unauthorized" });
    const refusal = this.#refusals.get(agentToken!);
    if (refusal === 403) return reply(403, { message: "403 Forbidden" });
    if (refusal === 404) return reply(404, { message: "404 Agent Not Found" });
    if (path === PROJECT_INFO_PATH) {
      const id = url.searchParams.get("id") ?? "";
      const project = this.#projects.find((p) => String(p.projectId) === id || p.path === id);
      if (project === undefined) return reply(404, { message: "404 Project Not Found" });
      if (project.readers !== undefined && !project.readers.includes(agentToken!)) {
        return reply(403, { message: "403 Forbidden" });
      }
      return reply(200, projectInfoBody(project));
    }
    const body = agentInfoBody(agent);
    if (fault === "wrong-shape") delete (body as Partial<typeof body>).agent_id;
    return reply(200, body);
  }

  /**
   * As Rails: Grape's validation (`requires :agent_id, type: Integer; requires :agent_config,
   * type: JSON`: 400), `Clusters::Agent.find` (404), then 204 without a body.
   */
  #agentConfiguration(
    record: RecordedRequest,
    reply: (status: number, body: unknown, raw?: boolean) => void,
  ) {
    const b = record.body;
    const fault = this.#postFaults.shift();
    if (fault !== undefined) return reply(fault, { message: `${fault} fault` });
    if (typeof b !== "object" || b === null || Array.isArray(b))
      return reply(400, { error: "agent_id is missing, agent_config is missing" });
    const { agent_id: id, agent_config: config } = b as Record<string, unknown>;
    // Grape coerces "42" and 42 alike; anything else is refused.
    const agentId =
      typeof id === "number" ? id : typeof id === "string" && /^\d+$/.test(id) ? Number(id) : NaN;
    if (!Number.isSafeInteger(agentId))
      return reply(400, { error: "agent_id is missing, agent_id is invalid" });
    if (typeof config !== "object" || config === null || Array.isArray(config))
      return reply(400, { error: "agent_config is missing, agent_config is invalid" });
    if (this.#authorizations.agent(agentId) === undefined)
      return reply(404, { message: "404 Agent Not Found" });
    this.takeConfiguration(agentId, config as Record<string, unknown>);
    return reply(204, "", true);
  }

  /**
   * allowed_agents for a job, as API::Ci::Jobs works it out: CiAccess::Finder for the job's project,
   * FilterService with the job's environment name and whether its pipeline's ref is protected.
   */
  #allowedAgents(job: TestJob) {
    const project = this.#namespaces.project(job.projectId)!;
    const found = this.#authorizations.ciAccessFor(project);
    const kept = this.#authorizations.filterCi(found, {
      ...(job.environment && { environment: job.environment.name }),
      protectedRef: job.protectedRef === true,
    });
    // `project.group&.self_and_ancestor_ids`: in traversal order, the root first.
    const groups = project.group ? this.#namespaces.selfAndAncestors(project.group).reverse() : [];
    return {
      job: { id: job.jobId },
      pipeline: { id: job.pipelineId },
      project: { id: project.id, groups: groups.map((g) => g.id) },
      user: {
        id: job.user.id,
        username: job.user.username,
        roles: Namespaces.roles(this.#namespaces.projectAccess(job.user.id, project)),
      },
      ...(job.environment && {
        environment: { slug: environmentSlug(job.environment.name), tier: job.environment.tier },
      }),
      authorizations: kept.map((a) => ({
        agentId: a.agent.id,
        configProject: { id: a.agent.project.id, path: a.agent.project.fullPath },
        config: a.config,
      })),
    };
  }

  /**
   * Grape's validation, then the user's session or token, then the agent (404), then the user's
   * access to it (AgentAuthorizations#authorizeProxyUser). As Rails: a personal access token it does
   * not find is 400 ("Unable to get user from request data": no user), a session it does not find
   * or a CSRF token that does not match it is 401.
   */
  #authorizeProxyUser(body: unknown): [number, unknown] {
    const b = (body ?? {}) as Record<string, unknown>;
    const types = ["session_cookie", "personal_access_token"];
    if (
      typeof b.agent_id !== "number" ||
      typeof b.access_key !== "string" ||
      !types.includes(String(b.access_type))
    )
      return [400, { error: "agent_id, access_type, access_key are missing or invalid" }];
    if (b.access_type === "session_cookie" && (typeof b.csrf_token !== "string" || b.csrf_token === ""))
      return [400, { error: "csrf_token is missing" }];
    const found = this.#users.get(b.access_key);
    const user = found?.accessType === b.access_type ? found : undefined;
    if (b.access_type === "session_cookie") {
      if (user === undefined) return [401, { message: "401 Unauthorized - Invalid session" }];
      if (user.csrfToken !== b.csrf_token)
        return [401, { message: "401 Unauthorized - CSRF token does not match" }];
    }
    if (user === undefined)
      return [400, { message: "400 Bad request - Unable to get user from request data" }];
    const agent = this.#authorizations.agent(b.agent_id);
    if (agent === undefined) return [404, { message: "404 Not found" }];
    return this.#authorizations.authorizeProxyUser({ id: user.id, username: user.username }, agent);
  }

  async #verifyJwt(header: string | string[] | undefined): Promise<RecordedRequest["jwt"]> {
    if (typeof header !== "string") return { ok: false, reason: "missing Gitlab-Kas-Api-Request header" };
    try {
      const { payload } = await jwtVerify(header, this.#secret, {
        algorithms: ["HS256"],
        issuer: "gitlab-kas",
        audience: "gitlab",
        requiredClaims: ["exp", "iat"],
        maxTokenAge: "2m",
      });
      return { ok: true, claims: payload };
    } catch (err) {
      return { ok: false, reason: (err as Error).message };
    }
  }
}

function agentProjectPath(agent: TestAgent): string {
  return agent.projectPath ?? `group/project-${agent.projectId}`;
}

/** The agent_info body as GitLab's Rails API renders it. */
export function agentInfoBody(agent: TestAgent) {
  const projectPath = agentProjectPath(agent);
  return {
    project_id: agent.projectId,
    agent_id: agent.agentId,
    agent_name: agent.agentName,
    gitaly_info: {
      address: agent.gitalyAddress ?? "tcp://127.0.0.1:8075",
      token: agent.gitalyToken ?? "gitaly-secret-token",
      features: { "gitaly-feature-example": "true" },
    },
    gitaly_repository: {
      storage_name: "default",
      relative_path: `${projectPath}.git`,
      gl_repository: `project-${agent.projectId}`,
      gl_project_path: projectPath,
    },
    default_branch: agent.defaultBranch ?? "main",
  };
}

/** The project_info body as GitLab's Rails API renders it. */
export function projectInfoBody(project: TestProject) {
  return {
    project_id: project.projectId,
    gitaly_info: {
      address: project.gitalyAddress ?? "tcp://127.0.0.1:8075",
      token: project.gitalyToken ?? "gitaly-secret-token",
      features: {},
    },
    gitaly_repository: {
      storage_name: "default",
      relative_path: `${project.path}.git`,
      gl_repository: `project-${project.projectId}`,
      gl_project_path: project.path,
    },
    default_branch: project.defaultBranch ?? "main",
  };
}
