// Real git repositories for tests, built with git's plumbing (commits go straight into the object
// store and refs; no work tree is read or written), so bare and non-bare repositories work the same:
// - `TestStorage` / `TestRepo`: bare repositories in a Gitaly-like storage; each commit changes its
//   branch's tree (a file set to null is deleted); branches, tags, the default branch, refs.
// - `GitRepo`: one repository (bare or not) in its own temp dir, the path kas is given; each commit's
//   tree is exactly the files given.
// Every git process goes through `git()`, with `GIT_ENV`.
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * Nothing from the caller's git environment (GIT_DIR, GIT_INDEX_FILE from a hook, ...) nor from the
 * user's or the system's configuration, and a fixed identity and date: the same objects on every
 * machine, with or without a git identity configured.
 */
export const GIT_ENV: NodeJS.ProcessEnv = {
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("GIT_"))),
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_AUTHOR_NAME: "Test",
  GIT_AUTHOR_EMAIL: "test@example.com",
  GIT_AUTHOR_DATE: "1700000000 +0000",
  GIT_COMMITTER_NAME: "Test",
  GIT_COMMITTER_EMAIL: "test@example.com",
  GIT_COMMITTER_DATE: "1700000000 +0000",
};

/**
 * Runs git in `dir` with `GIT_ENV` (plus `env`, e.g. GIT_INDEX_FILE), `input` on its stdin; resolves
 * with its stdout, rejects with its stderr.
 */
export function git(
  dir: string,
  args: readonly string[],
  options: { input?: string | Buffer; env?: NodeJS.ProcessEnv } = {},
): Promise<string> {
  const env = options.env ? { ...GIT_ENV, ...options.env } : GIT_ENV;
  return new Promise((resolve, reject) => {
    const child = execFile(
      "git",
      args,
      { cwd: dir, env, maxBuffer: 256 * 1024 * 1024, encoding: "utf8" },
      (err, stdout, stderr) => {
        if (err)
          reject(new Error(`git ${args.join(" ")} in ${dir}: ${stderr || err.message}`, { cause: err }));
        else resolve(stdout);
      },
    );
    // Commands that do not read stdin may exit before it is written: their EPIPE is no failure.
    child.stdin?.on("error", () => {});
    child.stdin?.end(options.input ?? "");
  });
}

/** The commit `rev` names in `repo`, or undefined. */
async function resolveCommit(repo: string, rev: string): Promise<string | undefined> {
  try {
    return (await git(repo, ["rev-parse", "--verify", "--quiet", `${rev}^{commit}`])).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** Writes each content as a blob in one git process (one per file took a minute for thousands); their ids in order. */
async function writeBlobs(repo: string, contents: Array<string | Buffer>): Promise<string[]> {
  if (contents.length === 0) return [];
  const dir = await mkdtemp(join(tmpdir(), "git-blobs-"));
  try {
    const paths = contents.map((_, i) => join(dir, String(i)));
    await Promise.all(contents.map((content, i) => writeFile(paths[i]!, content)));
    const out = await git(repo, ["hash-object", "-w", "--no-filters", "--stdin-paths"], {
      input: `${paths.join("\n")}\n`,
    });
    return out.trim().split("\n");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Commits onto `branch` of `repo` (its parent the branch's commit, if any) and moves the branch:
 * the tree is `files` (path -> content) over the parent's tree when `overParent`, else `files` alone;
 * null deletes a path. `index` is a scratch index file, removed after. Returns the commit id.
 */
async function commitFiles(
  repo: string,
  index: string,
  opts: {
    files: Record<string, string | Buffer | null>;
    branch: string;
    message: string;
    overParent: boolean;
  },
): Promise<string> {
  const env = { GIT_INDEX_FILE: index };
  const parent = await resolveCommit(repo, `refs/heads/${opts.branch}`);
  try {
    const base = opts.overParent && parent ? ["read-tree", parent] : ["read-tree", "--empty"];
    await git(repo, base, { env });
    const entries = Object.entries(opts.files);
    const oids = await writeBlobs(
      repo,
      entries.flatMap(([, content]) => (content === null ? [] : [content])),
    );
    const lines: string[] = [];
    for (const [path, content] of entries) {
      if (content === null)
        lines.push(`0 ${"0".repeat(40)}\t${path}\0`); // mode 0: remove the path
      else lines.push(`100644 ${oids.shift()}\t${path}\0`);
    }
    await git(repo, ["update-index", "-z", "--index-info"], { input: lines.join(""), env });
    const tree = (await git(repo, ["write-tree"], { env })).trim();
    const args = ["commit-tree", tree, "-m", opts.message, ...(parent ? ["-p", parent] : [])];
    const commit = (await git(repo, args)).trim();
    await git(repo, ["update-ref", `refs/heads/${opts.branch}`, commit]);
    return commit;
  } finally {
    await rm(index, { force: true });
  }
}

/** A bare repository in a `TestStorage`. */
export class TestRepo {
  #commits = 0;
  constructor(readonly dir: string) {}

  /**
   * Commits `files` (path -> content; null deletes) onto `branch` (created from nothing if new) and
   * returns the commit id.
   */
  async commit(
    files: Record<string, string | Buffer | null>,
    branch = "main",
    message?: string,
  ): Promise<string> {
    return commitFiles(this.dir, join(this.dir, "test-index"), {
      files,
      branch,
      message: message ?? `commit ${++this.#commits}`,
      overParent: true,
    });
  }

  async branch(name: string, at: string): Promise<void> {
    await git(this.dir, ["update-ref", `refs/heads/${name}`, at]);
  }

  /** Tags `at`; annotated tags get a tag object (whose id is returned), lightweight ones just a ref. */
  async tag(name: string, at: string, annotated: boolean): Promise<string> {
    if (!annotated) {
      await git(this.dir, ["update-ref", `refs/tags/${name}`, at]);
      return at;
    }
    await git(this.dir, ["tag", "-a", "-m", `tag ${name}`, name, at]);
    return (await git(this.dir, ["rev-parse", `refs/tags/${name}`])).trim();
  }

  async setDefaultBranch(name: string): Promise<void> {
    await git(this.dir, ["symbolic-ref", "HEAD", `refs/heads/${name}`]);
  }

  async deleteRef(ref: string): Promise<void> {
    await git(this.dir, ["update-ref", "-d", ref]);
  }

  /** The object `rev` names, or undefined. */
  resolve(rev: string): Promise<string | undefined> {
    return resolveCommit(this.dir, rev);
  }
}

/** A temporary directory holding bare repositories (a Gitaly storage); `remove` deletes it all. */
export class TestStorage {
  private constructor(readonly root: string) {}

  static async create(): Promise<TestStorage> {
    return new TestStorage(await mkdtemp(join(tmpdir(), "gitaly-storage-")));
  }

  /** A new empty bare repository at `relativePath`, HEAD on `defaultBranch`. */
  async init(relativePath: string, defaultBranch = "main"): Promise<TestRepo> {
    const dir = join(this.root, relativePath);
    await mkdir(dir, { recursive: true });
    await git(dir, ["init", "--quiet", "--bare", `--initial-branch=${defaultBranch}`]);
    return new TestRepo(dir);
  }

  async remove(): Promise<void> {
    await rm(this.root, { recursive: true, force: true });
  }
}

/** One repository, bare or with a work tree (left untouched), in a temp dir of its own. */
export class GitRepo {
  #commits = 0;

  private constructor(
    /** The path kas is given: the bare repository, or the work tree's top directory. */
    readonly path: string,
    readonly bare: boolean,
    readonly initialBranch: string,
    /** The temp dir holding the repository (and scratch files); `remove` deletes it. */
    readonly dir: string,
  ) {}

  /** A new empty repository in a temp dir (its branch unborn until the first commit). */
  static async init(opts: { bare?: boolean; initialBranch?: string } = {}): Promise<GitRepo> {
    const dir = await mkdtemp(join(tmpdir(), "git-repo-"));
    const path = join(dir, opts.bare ? "repo.git" : "repo");
    const branch = opts.initialBranch ?? "main";
    await git(dir, ["init", "-q", ...(opts.bare ? ["--bare"] : []), `--initial-branch=${branch}`, path]);
    return new GitRepo(path, opts.bare ?? false, branch, dir);
  }

  /** Runs git in this repository (`GIT_ENV` plus `env`); returns stdout without the final newline. */
  async git(args: string[], opts: { input?: string; env?: Record<string, string> } = {}): Promise<string> {
    return (await git(this.path, args, opts)).replace(/\n$/, "");
  }

  /**
   * A commit whose tree is exactly `files` (path -> content), on `branch` (default: the initial
   * branch), its parent that branch's current commit. Returns the commit id.
   */
  async commit(
    files: Record<string, string | Buffer>,
    opts: { branch?: string; message?: string } = {},
  ): Promise<string> {
    const n = ++this.#commits;
    return commitFiles(this.path, join(this.dir, `index-${n}`), {
      files,
      branch: opts.branch ?? this.initialBranch,
      message: opts.message ?? `commit ${n}`,
      overParent: false,
    });
  }

  /** Points `branch` at `commit` (creating it). */
  async branch(name: string, commit: string): Promise<void> {
    await this.git(["update-ref", `refs/heads/${name}`, commit]);
  }

  /** A lightweight tag, or an annotated one (a tag object) when `message` is given; returns the tag object's id for annotated tags. */
  async tag(name: string, target: string, message?: string): Promise<string> {
    await this.git(["tag", ...(message === undefined ? [] : ["-a", "-m", message]), name, target]);
    return this.git(["rev-parse", `refs/tags/${name}`]);
  }

  async remove(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}
