// RepositoryReader over Gitaly: refs from one InfoRefsUploadPack call (no objects), a commit id
// checked with FindCommit, one file with TreeEntry (bounded by `limit`), many files of a commit
// with one GetBlobs, a listing with GetTreeEntries.
import { type Metadata, status } from "@grpc/grpc-js";
import type { GitalyRepository } from "../../../../modules/runtime/index.ts";
import {
  type RefSelector,
  type RepositoryCallContext,
  RepositoryError,
  type RepositoryLocation,
  type RepositoryReader,
  type TreeFile,
} from "../../../../modules/runtime/repositories.ts";
import type { GetBlobsResponse } from "../../../../proto/gen/gitaly/blob.ts";
import {
  type FindCommitResponse,
  TreeEntry_EntryType,
  TreeEntryResponse_ObjectType,
} from "../../../../proto/gen/gitaly/commit.ts";
import type { Repository } from "../../../../proto/gen/gitaly/shared.ts";
import { cappedTotal, consumeStream, unaryCall } from "./calls.ts";
import { type CallSite, gitalyError, isMissingRepository, isServiceError } from "./errors.ts";
import { gitalyCallMetadata } from "./metadata.ts";
import { type GitalyClients, GitalyConnectionPool, type GitalyPoolOptions } from "./pool.ts";
import { headTarget, parseRefAdvertisement } from "./ref-advertisement.ts";

export interface GitalyRepositoriesOptions extends GitalyPoolOptions {
  /** Deadline of every call (ms). Default 30 s. */
  readonly callTimeoutMs?: number;
  /** Largest ref advertisement accepted (bytes). Default 16 MiB. */
  readonly maxAdvertisementBytes?: number;
  /** Most tree entries one listFiles accepts. Default 100 000. */
  readonly maxTreeEntries?: number;
  /** Clock for token timestamps (tests of clock skew); deadlines always use the real clock. */
  readonly now?: () => number;
}

type GitalyLocation = Extract<RepositoryLocation, { backend: "gitaly" }>;

const FULL_OID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/** What one call needs: clients, metadata, deadline, and how to name it in errors. */
interface Call {
  readonly clients: GitalyClients;
  readonly repository: Repository;
  readonly metadata: Metadata;
  readonly options: { deadline: Date };
  readonly signal: AbortSignal | undefined;
}

export class GitalyRepositories implements RepositoryReader {
  readonly #pool: GitalyConnectionPool;
  readonly #callTimeoutMs: number;
  readonly #maxAdvertisementBytes: number;
  readonly #maxTreeEntries: number;
  readonly #now: () => number;

  constructor(options: GitalyRepositoriesOptions = {}) {
    this.#pool = new GitalyConnectionPool(options);
    this.#callTimeoutMs = options.callTimeoutMs ?? 30_000;
    this.#maxAdvertisementBytes = options.maxAdvertisementBytes ?? 16 * 1024 * 1024;
    this.#maxTreeEntries = options.maxTreeEntries ?? 100_000;
    this.#now = options.now ?? Date.now;
  }

  /** Addresses with an open connection (for tests and metrics). */
  get connectedAddresses(): string[] {
    return this.#pool.addresses;
  }

  async resolveRef(
    location: RepositoryLocation,
    ref: RefSelector,
    ctx: RepositoryCallContext,
  ): Promise<string | undefined> {
    if ("commit" in ref) {
      const commit = ref.commit;
      if (!FULL_OID.test(commit)) return undefined;
      return this.#run(location, "FindCommit", ctx, async (call) => {
        const response = await unaryCall<FindCommitResponse>(
          (cb) =>
            call.clients.commit.findCommit(
              { repository: call.repository, revision: Buffer.from(commit) },
              call.metadata,
              call.options,
              cb,
            ),
          call.signal,
        );
        return response.commit?.id === commit ? commit : undefined;
      });
    }
    return this.#run(location, "InfoRefsUploadPack", ctx, async (call) => {
      const chunks: Buffer[] = [];
      const where = `Gitaly ${addressOf(location)}, project ${projectOf(location)}`;
      const max = this.#maxAdvertisementBytes;
      const count = cappedTotal(max, () => `${where}: ref advertisement over ${max} bytes`);
      await consumeStream(
        call.clients.smartHttp.infoRefsUploadPack(
          { repository: call.repository, gitConfigOptions: [], gitProtocol: "" },
          call.metadata,
          call.options,
        ),
        (message) => {
          count(message.data.length);
          chunks.push(message.data);
          return "continue";
        },
        call.signal,
      );
      const adv = parseRefAdvertisement(Buffer.concat(chunks));
      if ("branch" in ref) return adv.refs.get(`refs/heads/${ref.branch}`);
      if ("tag" in ref) {
        const name = `refs/tags/${ref.tag}`;
        return adv.peeled.get(name) ?? adv.refs.get(name);
      }
      const head = headTarget(adv);
      return head !== undefined ? adv.refs.get(head) : adv.refs.get("HEAD");
    });
  }

  async readFile(
    location: RepositoryLocation,
    commitId: string,
    path: string,
    maxBytes: number,
    ctx: RepositoryCallContext,
  ): Promise<Buffer | undefined> {
    const where = `Gitaly ${addressOf(location)}, project ${projectOf(location)}`;
    return this.#run(location, "TreeEntry", ctx, async (call) => {
      const chunks: Buffer[] = [];
      let received = 0;
      let found = false;
      let first = true;
      try {
        await consumeStream(
          call.clients.commit.treeEntry(
            {
              repository: call.repository,
              revision: Buffer.from(commitId),
              path: Buffer.from(trimPath(path)),
              // limit 0 means "no limit" to Gitaly; one byte over maxBytes still tells "too large".
              limit: String(maxBytes + 1),
            },
            call.metadata,
            call.options,
          ),
          (message) => {
            if (first) {
              first = false;
              // Older Gitaly answers a missing path with one empty response.
              if (message.oid === "" || message.type !== TreeEntryResponse_ObjectType.BLOB) return "stop";
              found = true;
              const size = Number(message.size);
              if (size > maxBytes) {
                throw new RepositoryError(
                  "too_large",
                  `${where}: ${path} is ${size} bytes, over ${maxBytes}`,
                );
              }
            }
            received += message.data.length;
            if (received > maxBytes) {
              throw new RepositoryError("too_large", `${where}: ${path} is over ${maxBytes} bytes`);
            }
            chunks.push(message.data);
            return "continue";
          },
          call.signal,
        );
      } catch (err) {
        if (isServiceError(err) && err.code === status.NOT_FOUND && !isMissingRepository(err))
          return undefined;
        throw err;
      }
      return found ? Buffer.concat(chunks) : undefined;
    });
  }

  async readFiles(
    location: RepositoryLocation,
    commitId: string,
    paths: readonly string[],
    maxBytesEach: number,
    ctx: RepositoryCallContext,
    maxTotalBytes = Number.POSITIVE_INFINITY,
  ): Promise<Map<string, Buffer>> {
    const files = new Map<string, Buffer>();
    // Gitaly names each blob by the path it was asked for: one request per distinct path.
    const asked = new Map<string, string>();
    for (const path of paths) if (!asked.has(trimPath(path))) asked.set(trimPath(path), path);
    if (asked.size === 0) return files;
    const where = `Gitaly ${addressOf(location)}, project ${projectOf(location)}`;
    return this.#run(location, "GetBlobs", ctx, async (call) => {
      const answered = new Set<string>();
      let total = 0;
      let current: { path: string; size: number; received: number; chunks: Buffer[] } | undefined;
      const finish = () => {
        if (current === undefined) return;
        if (current.received !== current.size) {
          throw new RepositoryError(
            "failed",
            `${where}: ${current.path}: received ${current.received} of ${current.size} bytes`,
          );
        }
        files.set(current.path, Buffer.concat(current.chunks));
        current = undefined;
      };
      await consumeStream(
        call.clients.blob.getBlobs(
          {
            repository: call.repository,
            revisionPaths: [...asked.keys()].map((path) => ({ revision: commitId, path: Buffer.from(path) })),
            // The limit is per blob; one byte over maxBytesEach still tells "too large".
            limit: String(maxBytesEach + 1),
          },
          call.metadata,
          call.options,
        ),
        (message: GetBlobsResponse) => {
          // A blob's first message names it; the ones after carry only data.
          if (message.path.length > 0 || message.oid !== "" || message.revision !== "") {
            finish();
            const trimmed = message.path.toString("utf8");
            const path = asked.get(trimmed);
            if (path === undefined || answered.has(trimmed)) {
              throw new RepositoryError(
                "failed",
                `${where}: GetBlobs answered ${JSON.stringify(trimmed)}, which was not asked for (or twice)`,
              );
            }
            answered.add(trimmed);
            // No such file, or a submodule: absent.
            if (message.oid === "" || message.isSubmodule) return "continue";
            const size = Number(message.size);
            if (size > maxBytesEach) {
              throw new RepositoryError(
                "too_large",
                `${where}: ${path} at ${commitId} is ${size} bytes, over ${maxBytesEach}`,
                { path },
              );
            }
            total += size;
            if (total > maxTotalBytes) {
              throw new RepositoryError(
                "too_large",
                `${where}: the files at ${commitId} are over ${maxTotalBytes} bytes together`,
              );
            }
            current = { path, size, received: 0, chunks: [] };
          } else if (current === undefined) {
            if (message.data.length === 0) return "continue";
            throw new RepositoryError("failed", `${where}: GetBlobs sent data before naming a blob`);
          }
          current.received += message.data.length;
          if (current.received > current.size) {
            throw new RepositoryError(
              "failed",
              `${where}: ${current.path}: more than its ${current.size} bytes received`,
            );
          }
          current.chunks.push(message.data);
          return "continue";
        },
        call.signal,
      );
      finish();
      return files;
    });
  }

  async listFiles(
    location: RepositoryLocation,
    commitId: string,
    dir: string,
    ctx: RepositoryCallContext,
  ): Promise<TreeFile[]> {
    const where = `Gitaly ${addressOf(location)}, project ${projectOf(location)}`;
    const prefix = trimPath(dir);
    return this.#run(location, "GetTreeEntries", ctx, async (call) => {
      const files: TreeFile[] = [];
      const max = this.#maxTreeEntries;
      const count = cappedTotal(max, () => `${where}: ${dir || "/"} has over ${max} entries`);
      try {
        await consumeStream(
          call.clients.commit.getTreeEntries(
            {
              repository: call.repository,
              revision: Buffer.from(commitId),
              // Gitaly names the root "."; an empty path is refused by newer versions.
              path: Buffer.from(prefix === "" ? "." : prefix),
              recursive: true,
            },
            call.metadata,
            call.options,
          ),
          (message) => {
            count(message.entries.length);
            for (const entry of message.entries) {
              if (entry.type !== TreeEntry_EntryType.BLOB) continue;
              const path = entry.path.toString("utf8");
              if (prefix !== "" && !path.startsWith(`${prefix}/`)) continue;
              files.push({ path, oid: entry.oid });
            }
            return "continue";
          },
          call.signal,
        );
      } catch (err) {
        // Newer Gitaly: NOT_FOUND (or INVALID_ARGUMENT) for a path that is not in the commit.
        if (
          isServiceError(err) &&
          (err.code === status.NOT_FOUND || err.code === status.INVALID_ARGUMENT) &&
          !isMissingRepository(err)
        )
          return [];
        throw err;
      }
      return files;
    });
  }

  async close(): Promise<void> {
    this.#pool.close();
  }

  /** Runs one call on `location`'s Gitaly with metadata, deadline and signal; errors become RepositoryErrors. */
  async #run<T>(
    location: RepositoryLocation,
    method: string,
    ctx: RepositoryCallContext,
    fn: (call: Call) => Promise<T>,
  ): Promise<T> {
    const gitaly = gitalyLocation(location);
    const site: CallSite = {
      address: gitaly.gitaly.address,
      project: gitaly.repository.glProjectPath,
      method,
      secret: gitaly.gitaly.token,
    };
    if (ctx.signal?.aborted) {
      throw new RepositoryError(
        "aborted",
        `Gitaly ${site.address}, project ${site.project}: ${method}: aborted`,
      );
    }
    try {
      return await this.#pool.use(gitaly.gitaly.address, (clients) =>
        fn({
          clients,
          repository: toRepository(gitaly.repository),
          metadata: gitalyCallMetadata(gitaly.gitaly, this.#now()),
          options: { deadline: new Date(Date.now() + this.#callTimeoutMs) },
          signal: ctx.signal,
        }),
      );
    } catch (err) {
      throw gitalyError(err, site);
    }
  }
}

function gitalyLocation(location: RepositoryLocation): GitalyLocation {
  if (location.backend !== "gitaly") {
    throw new RepositoryError("failed", `the Gitaly backend cannot read a ${location.backend} repository`);
  }
  return location;
}

function addressOf(location: RepositoryLocation): string {
  return location.backend === "gitaly" ? location.gitaly.address : location.path;
}

function projectOf(location: RepositoryLocation): string {
  return location.backend === "gitaly" ? location.repository.glProjectPath : location.path;
}

/** Paths are from the repository's root: no leading or trailing slash. */
function trimPath(path: string): string {
  return path.replace(/^\/+|\/+$/g, "");
}

function toRepository(repo: GitalyRepository): Repository {
  return {
    storageName: repo.storageName,
    relativePath: repo.relativePath,
    gitObjectDirectory: repo.gitObjectDirectory ?? "",
    gitAlternateObjectDirectories: repo.gitAlternateObjectDirectories ?? [],
    glRepository: repo.glRepository,
    glProjectPath: repo.glProjectPath,
  };
}
