// How kas modules read Git: one interface, two backends (Gitaly over gRPC as GitLab runs it, and
// plain repositories on local disk, the embedded default). Agent configuration and GitOps read
// through it; neither knows which backend answers.
import { CodedError } from "../../lib/tunnel/errors.ts";
import type { AgentInfo, GitalyInfo, GitalyRepository } from "./agent-info.ts";

/** Where a project's repository is: on a Gitaly server (from GitLab's `agent_info`), or on local disk. */
export type RepositoryLocation =
  | { readonly backend: "gitaly"; readonly gitaly: GitalyInfo; readonly repository: GitalyRepository }
  | { readonly backend: "local"; readonly path: string };

/** Which commit to read: a branch, a tag, a full commit id, or (none of them) the default branch. */
export type RefSelector =
  | { readonly branch: string }
  | { readonly tag: string }
  | { readonly commit: string }
  | Record<string, never>;

/** Who a call is made for: rate limits are kept per agent, and every call can be abandoned. */
export interface RepositoryCallContext {
  readonly agentId: string;
  readonly signal?: AbortSignal;
}

/** One file in a tree listing. */
export interface TreeFile {
  /** Path from the repository's root, '/'-separated, no leading slash. */
  readonly path: string;
  /** The blob's object id (Gitaly's tree listing carries no size: sizes are checked when a file is read). */
  readonly oid: string;
}

/**
 * Reads repositories. Every method may reject with a {@link RepositoryError}; none loads more than
 * it is asked for.
 */
export interface RepositoryReader {
  /**
   * The commit `ref` points at, without fetching content (cheap: what a poll does). Undefined when
   * the ref does not exist (an empty repository, a deleted branch).
   */
  resolveRef(
    location: RepositoryLocation,
    ref: RefSelector,
    ctx: RepositoryCallContext,
  ): Promise<string | undefined>;
  /**
   * One file's content at `commitId`. Undefined when there is no such file (or it is not a blob);
   * a `too_large` RepositoryError when it is larger than `maxBytes`, without reading it all.
   */
  readFile(
    location: RepositoryLocation,
    commitId: string,
    path: string,
    maxBytes: number,
    ctx: RepositoryCallContext,
  ): Promise<Buffer | undefined>;
  /**
   * Several files of `commitId` in one call (one backend round trip, one rate-limit token): a map
   * from path to content. Paths that do not exist (or are not blobs) are absent from the map; a
   * file larger than `maxBytesEach` is a `too_large` RepositoryError naming it, raised without
   * reading it all (its `path` is the file's). Callers pass at most a few thousand paths; [] answers an empty map.
   */
  readFiles(
    location: RepositoryLocation,
    commitId: string,
    paths: readonly string[],
    maxBytesEach: number,
    ctx: RepositoryCallContext,
    /** The files together: past it, a `too_large` RepositoryError (no `path`), reading no further. */
    maxTotalBytes?: number,
  ): Promise<Map<string, Buffer>>;
  /** Every blob under `dir` ("" for the root) at `commitId`, recursively; [] when `dir` does not exist. */
  listFiles(
    location: RepositoryLocation,
    commitId: string,
    dir: string,
    ctx: RepositoryCallContext,
  ): Promise<TreeFile[]>;
  /** Releases connections. */
  close(): Promise<void>;
}

export type RepositoryErrorCode =
  /** The server cannot be reached or answered UNAVAILABLE: try again later. */
  | "unavailable"
  /** The repository does not exist where the location says. */
  | "not_found"
  /** A file is over the size asked for. */
  | "too_large"
  /** The backend refused us (bad Gitaly token): an operator must fix the setup. */
  | "permission_denied"
  /** The call was abandoned (signal) or took too long. */
  | "aborted"
  /** Anything else the backend said. */
  | "failed";

export class RepositoryError extends CodedError<RepositoryErrorCode> {
  override name = "RepositoryError";
  /** The file a `too_large` error is about, when one call read several (readFiles). */
  readonly path: string | undefined;
  constructor(code: RepositoryErrorCode, message: string, options?: { cause?: unknown; path?: string }) {
    super(code, message, options);
    this.path = options?.path;
  }
}

/** Where the agent's own project (its configuration) is: Gitaly per GitLab, or a local repository. */
export function agentRepository(agent: AgentInfo): RepositoryLocation | undefined {
  if (agent.gitalyInfo && agent.gitalyRepository) {
    return { backend: "gitaly", gitaly: agent.gitalyInfo, repository: agent.gitalyRepository };
  }
  if (agent.localRepository !== undefined) return { backend: "local", path: agent.localRepository };
  return undefined;
}

/** One string per repository (never holding a secret): what polls are shared by. */
export function repositoryKey(location: RepositoryLocation): string {
  if (location.backend === "local") return `local:${location.path}`;
  const { storageName, relativePath } = location.repository;
  return `gitaly:${location.gitaly.address}:${storageName}:${relativePath}`;
}
