// The embedded default backend: plain git repositories (bare or not) on local disk, read with the
// git CLI. Untrusted names reach git only after git-names.ts has checked them, and object lookups
// go through `cat-file --batch-check` on stdin, where nothing can be read as an option. A ref whose
// files have not changed since the last lookup is answered without git (ref-cache.ts).
import { Counter, type Registry } from "prom-client";
import {
  type RefSelector,
  type RepositoryCallContext,
  RepositoryError,
  type RepositoryLocation,
  type RepositoryReader,
  type TreeFile,
} from "../../../modules/runtime/repositories.ts";
import { checkCommitId, checkRefName, checkTreePath } from "./git-names.ts";
import {
  type BatchCheckResult,
  FOR_EACH_REF_FORMAT,
  GitOutputError,
  parseBatch,
  parseBatchCheck,
  parseForEachRef,
  parseLsTree,
} from "./git-output.ts";
import { GitRunner, type GitRunnerOptions } from "./git-runner.ts";
import { type HeadState, RefCache, type RefCacheOptions } from "./ref-cache.ts";

export interface LocalGitOptions extends GitRunnerOptions {
  /** Largest tree listing (`ls-tree` output) accepted, bytes; more -> `too_large`. Default 16 MiB. */
  maxListBytes?: number;
  /** Ref answers kept while their files are unchanged (ref-cache.ts). */
  refCache?: RefCacheOptions;
  /** Where `kas_repository_local_ref_lookups_total{result}` goes; none without it. */
  registry?: Registry;
}

type RefResult = "hit" | "miss" | "uncached";

// Small answers (refs, batch-check lines) have a small bound.
const SMALL_OUTPUT = 64 * 1024;

export class LocalGitRepositories implements RepositoryReader {
  readonly #git: GitRunner;
  readonly #maxListBytes: number;
  readonly #refs: RefCache;
  readonly #refLookups: Counter<"result"> | undefined;

  constructor(opts: LocalGitOptions = {}) {
    this.#git = new GitRunner(opts);
    this.#maxListBytes = opts.maxListBytes ?? 16 * 1024 * 1024;
    this.#refs = new RefCache(opts.refCache);
    const { registry } = opts;
    this.#refLookups =
      registry &&
      ((registry.getSingleMetric("kas_repository_local_ref_lookups_total") as Counter<"result">) ??
        new Counter({
          name: "kas_repository_local_ref_lookups_total",
          help: "Branch, tag and default-branch lookups in local git repositories: hit (files unchanged, no git process), miss (git ran, answer kept), uncached (git ran, answer not kept: a worktree, a symbolic ref, a ref changed within seconds).",
          labelNames: ["result"],
          registers: [registry],
        }));
  }

  async resolveRef(
    location: RepositoryLocation,
    ref: RefSelector,
    ctx: RepositoryCallContext,
  ): Promise<string | undefined> {
    const repo = localPath(location);
    if ("commit" in ref) {
      const id = checkCommitId(ref.commit);
      const [object] = await this.#batchCheck(repo, [id], ctx);
      if (!object!.found) return undefined;
      if (object!.type !== "commit") throw notACommit(repo, `object ${id}`, object!.type);
      return id;
    }
    const refname =
      "branch" in ref
        ? `refs/heads/${checkRefName("branch", ref.branch)}`
        : "tag" in ref
          ? `refs/tags/${checkRefName("tag", ref.tag)}`
          : "HEAD";
    // A kept answer needs no git process, whose signal would have said so.
    if (ctx.signal?.aborted) throw new RepositoryError("aborted", `ref lookup in ${repo}: abandoned`);
    const lookup = await this.#refs.lookup(repo, refname);
    if (lookup.hit) {
      this.#refLookups?.inc({ result: "hit" });
      return lookup.oid;
    }
    const { probe } = lookup;
    const oid =
      refname === "HEAD"
        ? await this.#resolveHead(repo, probe.head, ctx)
        : await this.#resolveExact(repo, refname, ctx);
    const result: RefResult = this.#refs.keep(probe, oid) ? "miss" : "uncached";
    this.#refLookups?.inc({ result });
    return oid;
  }

  async readFile(
    location: RepositoryLocation,
    commitId: string,
    path: string,
    maxBytes: number,
    ctx: RepositoryCallContext,
  ): Promise<Buffer | undefined> {
    const repo = localPath(location);
    const commit = checkCommitId(commitId);
    const file = checkTreePath(path, "file");
    const entry = await this.#entryAt(repo, commit, file, ctx);
    if (!entry.found || entry.type !== "blob") return undefined;
    // The size comes from the object header: an oversized file is refused without reading it.
    if (entry.size > maxBytes) {
      throw new RepositoryError("too_large", `${file} at ${commit} is ${entry.size} bytes, over ${maxBytes}`);
    }
    const { stdout } = await this.#git.run({
      repo,
      args: ["cat-file", "blob", entry.oid],
      maxBytes: Math.max(1, entry.size),
      signal: ctx.signal,
    });
    if (stdout.length !== entry.size) {
      throw new RepositoryError(
        "failed",
        `${file} at ${commit}: read ${stdout.length} of ${entry.size} bytes`,
      );
    }
    return stdout;
  }

  async readFiles(
    location: RepositoryLocation,
    commitId: string,
    paths: readonly string[],
    maxBytesEach: number,
    ctx: RepositoryCallContext,
    maxTotalBytes = Number.POSITIVE_INFINITY,
  ): Promise<Map<string, Buffer>> {
    const repo = localPath(location);
    const commit = checkCommitId(commitId);
    const files = [...new Set(paths.map((p) => checkTreePath(p, "file")))];
    const out = new Map<string, Buffer>();
    if (files.length === 0) return out;
    // Sizes (and the commit) first, in one --batch-check: an oversized file is refused unread.
    const inputs = [`${commit}^{commit}`, ...files.map((f) => `${commit}:${f}`)];
    const [c, ...entries] = await this.#batchCheck(repo, inputs, ctx);
    if (!c!.found) throw new RepositoryError("failed", `no commit ${commit} in ${repo}`);
    const blobs: { path: string; oid: string; size: number }[] = [];
    for (const [i, entry] of entries.entries()) {
      if (!entry.found || entry.type !== "blob") continue;
      if (entry.size > maxBytesEach) {
        throw new RepositoryError(
          "too_large",
          `${files[i]} at ${commit} is ${entry.size} bytes, over ${maxBytesEach}`,
          { path: files[i]! },
        );
      }
      blobs.push({ path: files[i]!, oid: entry.oid, size: entry.size });
    }
    if (blobs.length === 0) return out;
    const total = blobs.reduce((sum, b) => sum + b.size, 0);
    if (total > maxTotalBytes) {
      throw new RepositoryError(
        "too_large",
        `${blobs.length} files at ${commit} are ${total} bytes together, over ${maxTotalBytes}`,
      );
    }
    // Then every content in one --batch, whose output is exactly this long.
    const expectedBytes = blobs.reduce((sum, b) => sum + `${b.oid} blob ${b.size}\n`.length + b.size + 1, 0);
    const { stdout } = await this.#git.run({
      repo,
      args: ["cat-file", "--batch"],
      input: blobs.map((b) => `${b.oid}\n`).join(""),
      maxBytes: expectedBytes,
      signal: ctx.signal,
    });
    const contents = parsed(repo, () => parseBatch(stdout, blobs));
    for (const [i, blob] of blobs.entries()) out.set(blob.path, contents[i]!);
    return out;
  }

  async listFiles(
    location: RepositoryLocation,
    commitId: string,
    dir: string,
    ctx: RepositoryCallContext,
  ): Promise<TreeFile[]> {
    const repo = localPath(location);
    const commit = checkCommitId(commitId);
    const prefix = checkTreePath(dir, "dir");
    const tree = await this.#entryAt(repo, commit, prefix, ctx);
    if (!tree.found || tree.type !== "tree") return [];
    const { stdout } = await this.#git.run({
      repo,
      args: ["ls-tree", "-r", "-z", "--full-tree", tree.oid],
      maxBytes: this.#maxListBytes,
      signal: ctx.signal,
    });
    return parsed(repo, () => parseLsTree(stdout))
      .filter((e) => e.type === "blob")
      .map((e) => ({ path: prefix === "" ? e.path : `${prefix}/${e.path}`, oid: e.oid }));
  }

  async close(): Promise<void> {}

  /** The object at `path` in `commit` (the root tree for ""); a missing commit is an error, not a missing file. */
  async #entryAt(repo: string, commit: string, path: string, ctx: RepositoryCallContext) {
    const [c, entry] = await this.#batchCheck(repo, [`${commit}^{commit}`, `${commit}:${path}`], ctx);
    if (!c!.found) throw new RepositoryError("failed", `no commit ${commit} in ${repo}`);
    return entry!;
  }

  /**
   * The default branch is where HEAD points; a detached HEAD (a bare mirror) is its own commit.
   * `head` is what the HEAD file held when it could be read (a regular file of the files backend,
   * naming a ref that is not itself symbolic): then one git process, else two.
   * Equivalent: `symbolic-ref -q HEAD` reads that same file and prints the ref it names (following
   * symbolic refs, which `head` excludes), or exits 1 for a commit id. A single `cat-file` of
   * `HEAD^{commit}` is not: on an unborn HEAD, git's DWIM rules go on to refs/tags/HEAD,
   * refs/heads/HEAD, refs/remotes/HEAD/HEAD and answer with one of those.
   */
  async #resolveHead(repo: string, head: HeadState | undefined, ctx: RepositoryCallContext) {
    let ref: string | undefined;
    if (head) ref = "ref" in head ? head.ref : undefined;
    else {
      const found = await this.#git.run({
        repo,
        args: ["symbolic-ref", "-q", "HEAD"],
        maxBytes: SMALL_OUTPUT,
        okExitCodes: [1],
        signal: ctx.signal,
      });
      if (found.exitCode === 0) ref = found.stdout.toString("utf8").trim();
    }
    if (ref !== undefined) return this.#resolveExact(repo, ref, ctx);
    const [object] = await this.#batchCheck(repo, ["HEAD^{commit}"], ctx);
    return object!.found ? object!.oid : undefined;
  }

  /** The commit the exact ref `refname` points at (annotated tags peeled), or undefined. */
  async #resolveExact(
    repo: string,
    refname: string,
    ctx: RepositoryCallContext,
  ): Promise<string | undefined> {
    // for-each-ref also matches refs below `refname/`: only the exact name counts.
    const { stdout } = await this.#git.run({
      repo,
      args: ["for-each-ref", `--format=${FOR_EACH_REF_FORMAT}`, "--end-of-options", refname],
      maxBytes: SMALL_OUTPUT,
      signal: ctx.signal,
    });
    const record = parsed(repo, () => parseForEachRef(stdout.toString("utf8"))).find(
      (r) => r.refname === refname,
    );
    if (!record) return undefined;
    const target = record.peeled ?? record;
    if (target.type === "commit") return target.oid;
    if (target.type !== "tag") throw notACommit(repo, refname, target.type);
    // A tag of a tag: for-each-ref peels one level, cat-file all of them.
    const [object] = await this.#batchCheck(repo, [`${target.oid}^{commit}`], ctx);
    if (!object!.found) throw notACommit(repo, refname, "tag");
    return object!.oid;
  }

  async #batchCheck(repo: string, inputs: string[], ctx: RepositoryCallContext): Promise<BatchCheckResult[]> {
    const input = inputs.map((i) => `${i}\n`).join("");
    const { stdout } = await this.#git.run({
      repo,
      args: ["cat-file", "--batch-check"],
      input,
      // A line is an object's header (under 100 bytes) or the input echoed with " missing".
      maxBytes: Math.max(SMALL_OUTPUT, Buffer.byteLength(input) + inputs.length * 128),
      signal: ctx.signal,
    });
    return parsed(repo, () => parseBatchCheck(stdout.toString("utf8"), inputs));
  }
}

function localPath(location: RepositoryLocation): string {
  if (location.backend !== "local") {
    throw new RepositoryError("failed", `the local git backend cannot read a ${location.backend} location`);
  }
  return location.path;
}

function notACommit(repo: string, what: string, type: string): RepositoryError {
  return new RepositoryError("failed", `${what} in ${repo} points at a ${type}, not a commit`);
}

function parsed<T>(repo: string, parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    if (err instanceof GitOutputError)
      throw new RepositoryError("failed", `${repo}: ${err.message}`, { cause: err });
    throw err;
  }
}
