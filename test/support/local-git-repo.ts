// Real git repositories for tests, built with git's plumbing so bare and non-bare repositories
// work the same way (commits go straight into the object store and refs; a non-bare repository's
// work tree is left untouched).
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

// Fixed identity and dates (reproducible ids), and nothing from the caller's git environment.
function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const clean: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("GIT_")) clean[k] = v;
  return {
    ...clean,
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_AUTHOR_NAME: "Test",
    GIT_AUTHOR_EMAIL: "test@example.com",
    GIT_AUTHOR_DATE: "2026-01-01T00:00:00Z",
    GIT_COMMITTER_NAME: "Test",
    GIT_COMMITTER_EMAIL: "test@example.com",
    GIT_COMMITTER_DATE: "2026-01-01T00:00:00Z",
    ...extra,
  };
}

export class GitRepo {
  #commits = 0;

  private constructor(
    /** The path kas is given: the bare repository, or the work tree's top directory. */
    readonly path: string,
    readonly bare: boolean,
    readonly initialBranch: string,
    readonly dir: string,
  ) {}

  /** A new empty repository in a temp dir (its branch unborn until the first commit). */
  static async init(opts: { bare?: boolean; initialBranch?: string } = {}): Promise<GitRepo> {
    const dir = await mkdtemp(join(tmpdir(), "git-repo-"));
    const path = join(dir, opts.bare ? "repo.git" : "repo");
    const branch = opts.initialBranch ?? "main";
    await run("git", ["init", "-q", ...(opts.bare ? ["--bare"] : []), "-b", branch, path], { env: env() });
    return new GitRepo(path, opts.bare ?? false, branch, dir);
  }

  /** Runs git in this repository; returns stdout without the final newline. */
  async git(args: string[], opts: { input?: string; env?: Record<string, string> } = {}): Promise<string> {
    const child = run("git", ["-C", this.path, ...args], { env: env(opts.env), maxBuffer: 64 * 1024 * 1024 });
    child.child.stdin!.on("error", () => {}); // git may not read its stdin
    child.child.stdin!.end(opts.input ?? "");
    return (await child).stdout.replace(/\n$/, "");
  }

  /**
   * A commit whose tree is exactly `files` (path -> content), on `branch` (default: the initial
   * branch), its parent that branch's current commit. Returns the commit id.
   */
  async commit(files: Record<string, string | Buffer>, opts: { branch?: string; message?: string } = {}) {
    const branch = opts.branch ?? this.initialBranch;
    const index = join(this.dir, `index-${++this.#commits}`);
    const lines: string[] = [];
    for (const [path, content] of Object.entries(files)) {
      const oid = await this.#hashObject(content);
      lines.push(`100644 ${oid}\t${path}\0`);
    }
    await this.git(["update-index", "-z", "--index-info"], {
      input: lines.join(""),
      env: { GIT_INDEX_FILE: index },
    });
    const tree = await this.git(["write-tree"], { env: { GIT_INDEX_FILE: index } });
    await rm(index, { force: true });
    const parent = await this.git(["rev-parse", "-q", "--verify", `refs/heads/${branch}`]).catch(() => "");
    const commit = await this.git([
      "commit-tree",
      ...(parent ? ["-p", parent] : []),
      "-m",
      opts.message ?? `commit ${this.#commits}`,
      tree,
    ]);
    await this.git(["update-ref", `refs/heads/${branch}`, commit]);
    return commit;
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

  async #hashObject(content: string | Buffer): Promise<string> {
    const child = run("git", ["-C", this.path, "hash-object", "-w", "--stdin"], { env: env() });
    child.child.stdin!.end(content);
    return (await child).stdout.trim();
  }

  async remove(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}
