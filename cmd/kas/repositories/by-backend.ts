// One RepositoryReader in front of both backends: each call goes to the one its location names,
// after the same checks of what it names (ref names, commit ids, paths), so both backends refuse
// the same things the same way.
import type {
  RefSelector,
  RepositoryCallContext,
  RepositoryLocation,
  RepositoryReader,
  TreeFile,
} from "../../../modules/runtime/index.ts";
import { checkCommitId, checkRefName, checkTreePath } from "./git-names.ts";

export class RepositoriesByBackend implements RepositoryReader {
  constructor(private readonly backends: Readonly<Record<RepositoryLocation["backend"], RepositoryReader>>) {}

  async resolveRef(
    location: RepositoryLocation,
    ref: RefSelector,
    ctx: RepositoryCallContext,
  ): Promise<string | undefined> {
    const checked: RefSelector =
      "branch" in ref
        ? { branch: checkRefName("branch", ref.branch) }
        : "tag" in ref
          ? { tag: checkRefName("tag", ref.tag) }
          : "commit" in ref
            ? { commit: checkCommitId(ref.commit) }
            : {};
    return this.backends[location.backend].resolveRef(location, checked, ctx);
  }

  async readFile(
    location: RepositoryLocation,
    commitId: string,
    path: string,
    maxBytes: number,
    ctx: RepositoryCallContext,
  ): Promise<Buffer | undefined> {
    const [commit, file] = [checkCommitId(commitId), checkTreePath(path, "file")];
    return this.backends[location.backend].readFile(location, commit, file, maxBytes, ctx);
  }

  async readFiles(
    location: RepositoryLocation,
    commitId: string,
    paths: readonly string[],
    maxBytesEach: number,
    ctx: RepositoryCallContext,
    maxTotalBytes?: number,
  ): Promise<Map<string, Buffer>> {
    const commit = checkCommitId(commitId);
    const files = paths.map((path) => checkTreePath(path, "file"));
    return this.backends[location.backend].readFiles(
      location,
      commit,
      files,
      maxBytesEach,
      ctx,
      maxTotalBytes,
    );
  }

  async listFiles(
    location: RepositoryLocation,
    commitId: string,
    dir: string,
    ctx: RepositoryCallContext,
  ): Promise<TreeFile[]> {
    const [commit, checkedDir] = [checkCommitId(commitId), checkTreePath(dir, "dir")];
    return this.backends[location.backend].listFiles(location, commit, checkedDir, ctx);
  }

  async close(): Promise<void> {
    await Promise.all(Object.values(this.backends).map((b) => b.close()));
  }
}
