// Which projects an agent may read, and where their repositories are (the GitOps module's manifest
// projects): GitLab's `project_info` (tool/gitlab/project-info.ts) with the agent's token (cached
// per token and project); without GitLab, the `manifest_projects` of the agent's entry in the
// static tokens file.

import {
  type AgentIdentity,
  type ProjectAccess,
  ProjectAccessError,
  type ProjectAccessErrorCode,
  type ProjectRepository,
} from "../../../modules/runtime/kas.ts";
import { tokenDigest } from "../../../tool/agent-token.ts";
import {
  AnswerCache,
  type AnswerCacheOptions,
  type GitLabClient,
  GitLabError,
  getProjectInfo,
  type ProjectInfoResponse,
} from "../../../tool/gitlab/index.ts";
import type { KasConfig } from "../config/index.ts";
import type { SharedAnswerCache, SharedAnswerKind } from "./shared-answer-cache.ts";
import { outcomeKind, SharedLookups, type SharedOutcome } from "./shared-lookups.ts";

/** GitLab's answer as the modules read it: where the project's repository is in Gitaly. */
export function projectRepositoryOf(info: ProjectInfoResponse): ProjectRepository {
  return {
    projectId: info.projectId,
    location: { backend: "gitaly", gitaly: info.gitalyInfo, repository: info.gitalyRepository },
  };
}

/** A project as agent configuration may name it: a numeric id, or a full path "group/sub/project". */
export function projectNameProblem(project: string): string | undefined {
  if (project === "") return "is empty";
  if (project.length > 1024) return "is longer than 1024 characters";
  if (/^\d+$/.test(project)) return /^[1-9]\d{0,18}$/.test(project) ? undefined : "is not a valid id";
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (/[\x00-\x1f\x7f]/.test(project)) return "contains control characters";
  if (project.startsWith("/") || project.endsWith("/") || project.includes("//"))
    return "has an empty path component";
  return undefined;
}

function refused(code: ProjectAccessErrorCode, project: string, why: string): ProjectAccessError {
  return new ProjectAccessError(code, `project ${JSON.stringify(project)}: ${why}`);
}

/** Without GitLab: the agent's `manifest_projects` from the static tokens file; any other project is forbidden. */
export class StaticProjectAccess implements ProjectAccess {
  async repositoryFor(agent: AgentIdentity, project: string): Promise<ProjectRepository> {
    const problem = projectNameProblem(project);
    if (problem) throw refused("not_found", project, `the project name ${problem}`);
    const path = agent.localManifestProjects?.[project];
    if (path === undefined || !Object.hasOwn(agent.localManifestProjects!, project)) {
      throw refused(
        "forbidden",
        project,
        `not among the manifest projects of agent ${agent.agentId} (manifest_projects of its entry in the static tokens file)`,
      );
    }
    return { projectId: "", location: { backend: "local", path } };
  }
}

/** agent.gitops.project_info_cache_ttl, agent.info_cache_error_ttl and the bound on entries. */
export type GitLabProjectAccessOptions = AnswerCacheOptions & {
  /**
   * Answers shared with the other replicas (Redis), asked before GitLab; this process's cache then
   * holds only what this process got from GitLab itself, and answers while Redis is down.
   */
  shared?: SharedAnswerCache;
};

/**
 * project_info as Redis holds it (under a digest of the token and the project, sealed with the
 * project as associated data): the repository, or a definitive refusal.
 */
export const PROJECT_INFO: SharedAnswerKind<SharedOutcome<ProjectRepository, ProjectAccessError>> =
  outcomeKind({
    name: "project_info",
    valueKey: "repository",
    isValue: (repo) => {
      const l = repo.location as Record<string, unknown> | undefined;
      const gitaly = l?.gitaly as Record<string, unknown> | undefined;
      const repository = l?.repository as Record<string, unknown> | undefined;
      return (
        typeof repo.projectId === "string" &&
        l?.backend === "gitaly" &&
        typeof gitaly?.address === "string" &&
        typeof repository?.relativePath === "string"
      );
    },
    refusal: (code, message) =>
      code === "not_found" || code === "forbidden" ? new ProjectAccessError(code, message) : undefined,
    maxMessage: 2000,
  });

/**
 * GitLab's `project_info` with the agent's token, cached per (token digest, project): the token
 * itself is never a key nor logged. Concurrent lookups of one pair share one request;
 * `unavailable` is never cached. With `shared`, the replicas share the answers through Redis.
 */
export class GitLabProjectAccess implements ProjectAccess {
  readonly #client: GitLabClient;
  readonly #cache: AnswerCache<ProjectRepository, ProjectAccessError>;
  readonly #shared: SharedLookups<ProjectRepository, ProjectAccessError> | undefined;

  /** `client` stays its owner's: closing it is the owner's business. */
  constructor(client: GitLabClient, { shared, ...options }: GitLabProjectAccessOptions = {}) {
    this.#client = client;
    this.#cache = new AnswerCache((err) => {
      const error = err as ProjectAccessError; // the lookup below throws only these
      return { error, definitive: isDefinitive(error) };
    }, options);
    this.#shared =
      shared &&
      new SharedLookups({
        shared,
        kind: PROJECT_INFO,
        local: this.#cache,
        ttlMs: options.ttlMs ?? 300_000,
        errorTtlMs: options.errorTtlMs ?? 60_000,
        definitive: (err): err is ProjectAccessError =>
          err instanceof ProjectAccessError && isDefinitive(err),
      });
  }

  async repositoryFor(
    agent: AgentIdentity,
    project: string,
    signal?: AbortSignal,
  ): Promise<ProjectRepository> {
    const problem = projectNameProblem(project);
    if (problem) throw refused("not_found", project, `the project name ${problem}`);
    const token = agent.token.reveal();
    // Shared by every caller: no single caller's signal may cancel it; the API's deadline bounds it.
    const lookup = () =>
      getProjectInfo(this.#client, token, project).then(projectRepositoryOf, (err: unknown) => {
        throw toAccessError(project, err);
      });
    const key = `${tokenDigest(token).toString("base64")}\0${project}`;
    return this.#shared === undefined
      ? this.#cache.get(key, lookup, signal)
      : this.#shared.get(key, token, project, lookup, signal);
  }
}

/** GitLab said no (cached for the error TTL); `unavailable` says nothing about the agent. */
function isDefinitive(err: ProjectAccessError): boolean {
  return err.code !== "unavailable";
}

function toAccessError(project: string, err: unknown): ProjectAccessError {
  if (!(err instanceof GitLabError)) {
    return refused("unavailable", project, `cannot ask GitLab: ${(err as Error)?.message ?? String(err)}`);
  }
  switch (err.kind) {
    case "unauthenticated":
    case "forbidden":
      return refused("forbidden", project, `GitLab refuses the agent access: ${err.message}`);
    case "not_found":
      return refused(
        "not_found",
        project,
        `GitLab does not know it, or hides it from the agent: ${err.message}`,
      );
    default:
      return refused("unavailable", project, `cannot ask GitLab now: ${err.message}`);
  }
}

/**
 * Agents authenticated by GitLab (their identity names a Gitaly server) ask GitLab (`gitlab`, from
 * gitlab.address); agents of the static tokens file read their `manifest_projects`. With `shared`
 * (kas's Redis is configured), GitLab's answers are shared by the replicas through it.
 */
export function createProjectAccessFromConfig(
  config: KasConfig,
  gitlab: GitLabClient | undefined,
  shared?: SharedAnswerCache,
): ProjectAccess {
  const local = new StaticProjectAccess();
  const viaGitLab =
    gitlab &&
    new GitLabProjectAccess(gitlab, {
      ttlMs: config.agent.gitops.projectInfoCacheTtlMs,
      errorTtlMs: config.agent.gitops.projectInfoCacheErrorTtlMs,
      maxEntries: config.agent.infoCacheMaxEntries,
      ...(shared && { shared }),
    });
  return {
    repositoryFor(agent, project, signal) {
      return viaGitLab !== undefined && agent.gitalyInfo !== undefined
        ? viaGitLab.repositoryFor(agent, project, signal)
        : local.repositoryFor(agent, project);
    },
  };
}
