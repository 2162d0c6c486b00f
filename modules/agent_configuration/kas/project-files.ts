// Every agent configuration file of a project at one commit, read together: one listing of
// .gitlab/agents and one blob batch, whatever the number of agents. A herd of agents reconnecting
// to a replica then costs Gitaly two calls per project and commit, not one per agent. A file over
// the size allowed is that agent's refusal and is left out of the batch; a project whose files are
// too many or too large together is read per agent instead.
import {
  type RepositoryCallContext,
  RepositoryError,
  type RepositoryLocation,
  type RepositoryReader,
} from "../../runtime/index.ts";

const AGENTS_DIR = ".gitlab/agents";
/** `configurationPath(name)` for some agent name: `.gitlab/agents/<name>/config.yaml`. */
const CONFIGURATION_FILE = /^\.gitlab\/agents\/[^/]+\/config\.yaml$/;

export interface ProjectFilesLimits {
  /** Largest file accepted (the agent's own limit). */
  maxFileBytes: number;
  /** The files together, at most: what a watch keeps for its commit. */
  maxTotalBytes: number;
  /** Most files read together (readFiles takes at most a few thousand paths). */
  maxFiles: number;
  /** Oversized files left out one at a time, each costing one more batch, before reading per agent. */
  maxOversized: number;
}

/** The project's agent configuration files at `commit`, or (`perAgent`) why each agent reads its own. */
export type ProjectFiles =
  | {
      readonly commit: string;
      readonly perAgent?: undefined;
      /** Path -> content; a path absent here and not in `oversized` has no file. */
      readonly files: ReadonlyMap<string, Buffer>;
      /** Files larger than `maxFileBytes`: their agents' refusals. */
      readonly oversized: ReadonlySet<string>;
    }
  | { readonly commit: string; readonly perAgent: string };

/**
 * Reads the files. Throws the repository's errors (other than those that make the project read per
 * agent); every call is made with `ctx` (charged to the agent the read is for).
 */
export async function readProjectFiles(
  reader: RepositoryReader,
  location: RepositoryLocation,
  commit: string,
  limits: ProjectFilesLimits,
  ctx: RepositoryCallContext,
): Promise<ProjectFiles> {
  let paths: string[];
  try {
    const listing = await reader.listFiles(location, commit, AGENTS_DIR, ctx);
    paths = listing.map((f) => f.path).filter((p) => CONFIGURATION_FILE.test(p));
  } catch (err) {
    if (isTooLarge(err)) return { commit, perAgent: `${AGENTS_DIR} is too large to list: ${err.message}` };
    throw err;
  }
  if (paths.length > limits.maxFiles) {
    return { commit, perAgent: `${paths.length} configuration files, over ${limits.maxFiles}` };
  }
  const oversized = new Set<string>();
  for (;;) {
    if (paths.length === 0) return { commit, files: new Map(), oversized };
    try {
      const files = await reader.readFiles(
        location,
        commit,
        paths,
        limits.maxFileBytes,
        ctx,
        limits.maxTotalBytes,
      );
      return { commit, files, oversized };
    } catch (err) {
      if (!isTooLarge(err)) throw err;
      // Without a path: the files together are over maxTotalBytes.
      const path = paths.find((p) => p === err.path);
      if (path === undefined || oversized.size >= limits.maxOversized) {
        return { commit, perAgent: err.message };
      }
      oversized.add(path);
      paths = paths.filter((p) => p !== path);
    }
  }
}

function isTooLarge(err: unknown): err is RepositoryError {
  return err instanceof RepositoryError && err.code === "too_large";
}
