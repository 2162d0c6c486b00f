// One RepositoryReader in front of both backends: each call goes to the one its location names.
import type {
  RefSelector,
  RepositoryCallContext,
  RepositoryLocation,
  RepositoryReader,
  TreeFile,
} from "../../../modules/runtime/index.ts";

export class RepositoriesByBackend implements RepositoryReader {
  constructor(private readonly backends: Readonly<Record<RepositoryLocation["backend"], RepositoryReader>>) {}

  resolveRef(
    location: RepositoryLocation,
    ref: RefSelector,
    ctx: RepositoryCallContext,
  ): Promise<string | undefined> {
    return this.backends[location.backend].resolveRef(location, ref, ctx);
  }

  readFile(
    location: RepositoryLocation,
    commitId: string,
    path: string,
    maxBytes: number,
    ctx: RepositoryCallContext,
  ): Promise<Buffer | undefined> {
    return this.backends[location.backend].readFile(location, commitId, path, maxBytes, ctx);
  }

  listFiles(
    location: RepositoryLocation,
    commitId: string,
    dir: string,
    ctx: RepositoryCallContext,
  ): Promise<TreeFile[]> {
    return this.backends[location.backend].listFiles(location, commitId, dir, ctx);
  }

  async close(): Promise<void> {
    await Promise.all(Object.values(this.backends).map((b) => b.close()));
  }
}
