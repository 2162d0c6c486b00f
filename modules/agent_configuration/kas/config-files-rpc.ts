// The agent configuration files of a project on GitLab's gRPC API: GitLab's
// ConfigurationProject.ListAgentConfigFiles, read through Gitaly from the branch GitLab names
// (`default_branch`), else from the repository's default branch.
import * as grpc from "@grpc/grpc-js";
import {
  type AgentConfigFile,
  type ConfigurationProjectServer,
  ConfigurationProjectService,
  type ListAgentConfigFilesRequest,
  protobufFileName,
} from "../../../proto/gen/agent_configuration/v1/configuration_project_rpc.ts";
import {
  callSignal,
  deadlinePassed,
  type GitLabRpc,
  type RefSelector,
  type RepositoryCallContext,
  RepositoryError,
  type RepositoryLocation,
  type RepositoryReader,
  rpcError,
} from "../../runtime/index.ts";

const AGENTS_DIR = ".gitlab/agents";
const CONFIG_FILE = /^\.gitlab\/agents\/([^/]+)\/config\.yaml$/;
/** Rate limits toward Gitaly are kept per agent; GitLab's own listings share one bucket. */
const RATE_LIMIT_KEY = "gitlab:list_agent_config_files";

/** Where GitLab says the project's repository is; INVALID_ARGUMENT when it does not say. */
function locationOf(request: ListAgentConfigFilesRequest): RepositoryLocation {
  const { repository, gitalyInfo } = request;
  if (!repository?.storageName || !repository.relativePath) {
    throw rpcError(grpc.status.INVALID_ARGUMENT, "repository: storage_name and relative_path are required");
  }
  if (!gitalyInfo?.address) throw rpcError(grpc.status.INVALID_ARGUMENT, "gitaly_info: address is required");
  return {
    backend: "gitaly",
    gitaly: {
      address: gitalyInfo.address,
      ...(gitalyInfo.token && { token: gitalyInfo.token }),
      features: gitalyInfo.features,
    },
    repository: {
      storageName: repository.storageName,
      relativePath: repository.relativePath,
      glRepository: repository.glRepository,
      glProjectPath: repository.glProjectPath,
      ...(repository.gitObjectDirectory && { gitObjectDirectory: repository.gitObjectDirectory }),
      ...(repository.gitAlternateObjectDirectories.length > 0 && {
        gitAlternateObjectDirectories: repository.gitAlternateObjectDirectories,
      }),
    },
  };
}

/**
 * The branch GitLab asks for, as GitLab's kas reads it (git.ExplicitRefOrHead): a name or
 * `refs/heads/<name>`; empty is the repository's default branch (HEAD).
 */
export function branchOf(defaultBranch: string): RefSelector {
  const branch = defaultBranch.startsWith("refs/heads/")
    ? defaultBranch.slice("refs/heads/".length)
    : defaultBranch;
  return branch === "" ? {} : { branch };
}

/**
 * `.gitlab/agents/<name>/config.yaml` on `ref` ([] for an empty repository or a branch that does
 * not exist: nothing to list, as GitLab's kas answers).
 */
export async function listAgentConfigFiles(
  repositories: RepositoryReader,
  location: RepositoryLocation,
  ctx: RepositoryCallContext,
  ref: RefSelector = {},
): Promise<AgentConfigFile[]> {
  const commit = await repositories.resolveRef(location, ref, ctx);
  if (commit === undefined) return [];
  const files = await repositories.listFiles(location, commit, AGENTS_DIR, ctx);
  return files.flatMap(({ path }) => {
    const agentName = CONFIG_FILE.exec(path)?.[1];
    return agentName === undefined ? [] : [{ name: path, agentName }];
  });
}

/** A repository failure as the status GitLab gets. */
function statusOf(err: RepositoryError, call: { getDeadline(): grpc.Deadline }): grpc.ServiceError {
  const { status } = grpc;
  switch (err.code) {
    case "not_found":
      return rpcError(status.NOT_FOUND, `the repository does not exist: ${err.message}`);
    case "unavailable":
      return rpcError(status.UNAVAILABLE, `Gitaly cannot answer now: ${err.message}`);
    case "permission_denied":
      return rpcError(status.PERMISSION_DENIED, `Gitaly refused kas: ${err.message}`);
    case "aborted":
      return deadlinePassed(call)
        ? rpcError(status.DEADLINE_EXCEEDED, "the call's deadline passed while reading the repository")
        : rpcError(status.CANCELLED, "the call was cancelled");
    default:
      return rpcError(status.INTERNAL, `cannot list the repository: ${err.message}`);
  }
}

/** `gitlab.agent.configuration_project.rpc.ConfigurationProject` on GitLab's gRPC API. */
export function addConfigurationProjectService(rpc: GitLabRpc, repositories: RepositoryReader): void {
  const service: ConfigurationProjectServer = {
    listAgentConfigFiles(call, callback) {
      const ctx = { agentId: RATE_LIMIT_KEY, signal: callSignal(call) };
      Promise.resolve()
        .then(() =>
          listAgentConfigFiles(
            repositories,
            locationOf(call.request),
            ctx,
            branchOf(call.request.defaultBranch),
          ),
        )
        .then(
          (configFiles) => callback(null, { configFiles }),
          (err: unknown) => callback(err instanceof RepositoryError ? statusOf(err, call) : (err as Error)),
        );
    },
  };
  rpc.addService(ConfigurationProjectService, service, protobufFileName);
}
