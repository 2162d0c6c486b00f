// Real git repositories for tests, bare like Gitaly's, built with git's plumbing (no work tree):
// commit files onto a branch, branch, tag (annotated or lightweight), change the default branch.
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A fixed identity and no user or system configuration: the same objects on every machine. */
export const GIT_ENV: NodeJS.ProcessEnv = {
  ...process.env,
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_AUTHOR_NAME: "Test",
  GIT_AUTHOR_EMAIL: "test@example.com",
  GIT_AUTHOR_DATE: "1700000000 +0000",
  GIT_COMMITTER_NAME: "Test",
  GIT_COMMITTER_EMAIL: "test@example.com",
  GIT_COMMITTER_DATE: "1700000000 +0000",
};

export function git(
  dir: string,
  args: readonly string[],
  options: { input?: string | Buffer; env?: NodeJS.ProcessEnv } = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      "git",
      args,
      { cwd: dir, env: options.env ?? GIT_ENV, maxBuffer: 256 * 1024 * 1024, encoding: "utf8" },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`git ${args.join(" ")} in ${dir}: ${stderr || err.message}`));
        else resolve(stdout);
      },
    );
    // Commands that do not read stdin may exit before it is written: their EPIPE is no failure.
    child.stdin?.on("error", () => {});
    child.stdin?.end(options.input ?? "");
  });
}

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
    const env = { ...GIT_ENV, GIT_INDEX_FILE: join(this.dir, "test-index") };
    const parent = await this.resolve(`refs/heads/${branch}`);
    await git(this.dir, parent ? ["read-tree", parent] : ["read-tree", "--empty"], { env });
    for (const [path, content] of Object.entries(files)) {
      if (content === null) {
        await git(this.dir, ["update-index", "--force-remove", "--", path], { env });
        continue;
      }
      const oid = (await git(this.dir, ["hash-object", "-w", "--stdin"], { input: content, env })).trim();
      await git(this.dir, ["update-index", "--add", "--cacheinfo", `100644,${oid},${path}`], { env });
    }
    const tree = (await git(this.dir, ["write-tree"], { env })).trim();
    const commitMessage = message ?? `commit ${++this.#commits}`;
    const args = ["commit-tree", tree, "-m", commitMessage, ...(parent ? ["-p", parent] : [])];
    const commit = (await git(this.dir, args, { env })).trim();
    await git(this.dir, ["update-ref", `refs/heads/${branch}`, commit]);
    return commit;
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
  async resolve(rev: string): Promise<string | undefined> {
    try {
      return (
        (await git(this.dir, ["rev-parse", "--verify", "--quiet", `${rev}^{commit}`])).trim() || undefined
      );
    } catch {
      return undefined;
    }
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
