// `GET /api/v4/internal/kubernetes/agent_info` (header `Authorization: Bearer <agent token>`):
// who an agent token belongs to, and where its configuration project is in Gitaly.
import { agentTokenHeaders, type GitLabClient, type GitLabRefusals } from "./client.ts";
import { Reader } from "./reader.ts";

export const AGENT_INFO_PATH = "/api/v4/internal/kubernetes/agent_info";

/** Where a project lives in Gitaly (`gitaly_info`). */
export interface GitalyInfo {
  address: string;
  /** A secret: never log it. */
  token?: string;
  features: Record<string, string>;
}

/** A project's repository in Gitaly (`gitaly_repository`). */
export interface GitalyRepository {
  storageName: string;
  relativePath: string;
  glRepository: string;
  glProjectPath: string;
  gitObjectDirectory?: string;
  gitAlternateObjectDirectories?: string[];
}

/** GitLab's answer. Ids are decimal strings (GitLab's are 64-bit). */
export interface AgentInfoResponse {
  agentId: string;
  projectId: string;
  agentName: string;
  defaultBranch?: string;
  gitalyInfo: GitalyInfo;
  gitalyRepository: GitalyRepository;
}

const AGENT_INFO_REFUSALS: GitLabRefusals = {
  what: "agent_info",
  unauthenticated: "agent token is invalid or revoked",
  forbidden: "GitLab refused the agent token",
  notFound: "agent not found",
};

/** Who `agentToken` belongs to. Rejects with a GitLabError (or `signal`'s reason). */
export function getAgentInfo(
  client: GitLabClient,
  agentToken: string,
  signal?: AbortSignal,
): Promise<AgentInfoResponse> {
  return client.request(
    {
      method: "GET",
      path: AGENT_INFO_PATH,
      headers: agentTokenHeaders(agentToken),
      refusals: AGENT_INFO_REFUSALS,
      parse: parseAgentInfoResponse,
    },
    signal,
  );
}

/**
 * Checks the JSON body of `agent_info`. The wire names are GitLab's: project_id, agent_id,
 * agent_name, gitaly_info {address, token, features}, gitaly_repository {storage_name,
 * relative_path, gl_repository, gl_project_path, ...}, default_branch. A body of another shape is
 * an `unavailable` GitLabError that says which field is wrong (GitLab and kas versions disagree).
 */
export function parseAgentInfoResponse(body: unknown): AgentInfoResponse {
  const r = new Reader("agent_info response");
  const root = r.object(body, "");
  const info: AgentInfoResponse = {
    projectId: r.id(root, "project_id"),
    agentId: r.id(root, "agent_id"),
    agentName: r.string(root, "agent_name"),
    gitalyInfo: parseGitalyInfo(r, r.object(root.gitaly_info, "gitaly_info")),
    gitalyRepository: parseGitalyRepository(r, r.object(root.gitaly_repository, "gitaly_repository")),
  };
  const branch = r.optionalString(root, "default_branch");
  if (branch !== undefined) info.defaultBranch = branch;
  return info;
}

export function parseGitalyInfo(r: Reader, o: Record<string, unknown>): GitalyInfo {
  const info: GitalyInfo = { address: r.string(o, "address", "gitaly_info."), features: {} };
  const token = r.optionalString(o, "token", "gitaly_info.", true);
  if (token !== undefined) info.token = token;
  if (o.features !== undefined && o.features !== null) {
    const features = r.object(o.features, "gitaly_info.features");
    for (const key of Object.keys(features)) {
      info.features[key] = r.string(features, key, "gitaly_info.features.", true);
    }
  }
  return info;
}

export function parseGitalyRepository(r: Reader, o: Record<string, unknown>): GitalyRepository {
  const p = "gitaly_repository.";
  const repo: GitalyRepository = {
    storageName: r.string(o, "storage_name", p),
    relativePath: r.string(o, "relative_path", p),
    glRepository: r.string(o, "gl_repository", p),
    glProjectPath: r.string(o, "gl_project_path", p),
  };
  const objectDir = r.optionalString(o, "git_object_directory", p, true);
  if (objectDir) repo.gitObjectDirectory = objectDir;
  const alternates = o.git_alternate_object_directories;
  if (alternates !== undefined && alternates !== null) {
    if (!Array.isArray(alternates) || !alternates.every((a) => typeof a === "string")) {
      throw r.fail(`${p}git_alternate_object_directories`, "expected an array of strings");
    }
    if (alternates.length > 0) repo.gitAlternateObjectDirectories = alternates;
  }
  return repo;
}
