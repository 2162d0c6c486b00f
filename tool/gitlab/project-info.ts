// `GET /api/v4/internal/kubernetes/project_info?id=<id or full path>` (header `Authorization:
// Bearer <agent token>`): whether an agent may read a project, and where its repository is in Gitaly.

import {
  type GitalyInfo,
  type GitalyRepository,
  parseGitalyInfo,
  parseGitalyRepository,
} from "./agent-info.ts";
import { agentTokenHeaders, type GitLabClient, type GitLabRefusals } from "./client.ts";
import { Reader } from "./reader.ts";

export const PROJECT_INFO_PATH = "/api/v4/internal/kubernetes/project_info";

/** GitLab's answer: the project's id and its repository in Gitaly. */
export interface ProjectInfoResponse {
  projectId: string;
  gitalyInfo: GitalyInfo;
  gitalyRepository: GitalyRepository;
}

const PROJECT_INFO_REFUSALS: GitLabRefusals = {
  what: "project_info",
  unauthenticated: "GitLab does not accept the agent's token",
  forbidden: "the agent may not read this project",
  notFound: "no such project",
};

/** `project` (a numeric id or a full path) as the agent of `agentToken` may read it. Rejects with a GitLabError. */
export function getProjectInfo(
  client: GitLabClient,
  agentToken: string,
  project: string,
  signal?: AbortSignal,
): Promise<ProjectInfoResponse> {
  return client.request(
    {
      method: "GET",
      path: PROJECT_INFO_PATH,
      query: { id: project },
      headers: agentTokenHeaders(agentToken),
      refusals: PROJECT_INFO_REFUSALS,
      parse: parseProjectInfoResponse,
    },
    signal,
  );
}

/** The body of `project_info`: `{project_id, gitaly_info, gitaly_repository, ...}` (GitLab's wire names). */
export function parseProjectInfoResponse(body: unknown): ProjectInfoResponse {
  const r = new Reader("project_info response");
  const root = r.object(body, "");
  return {
    projectId: r.id(root, "project_id"),
    gitalyInfo: parseGitalyInfo(r, r.object(root.gitaly_info, "gitaly_info")),
    gitalyRepository: parseGitalyRepository(r, r.object(root.gitaly_repository, "gitaly_repository")),
  };
}
