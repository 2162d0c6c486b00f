// The demo agent's git projects (configuration, manifests), as GitLab would keep them but on local disk: a git
// repository (with a work tree, so `git log` in it just works) made and changed with the git CLI.
import { execFile } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

// A fixed author, and nothing from the user's or the system's git configuration (no identity
// needed, no signing or hooks) nor from the caller's GIT_* variables (GIT_DIR, ...).
function gitEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("GIT_")) env[k] = v;
  return {
    ...env,
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_AUTHOR_NAME: "Demo",
    GIT_AUTHOR_EMAIL: "demo@example.com",
    GIT_COMMITTER_NAME: "Demo",
    GIT_COMMITTER_EMAIL: "demo@example.com",
  };
}

export class ConfigProject {
  private constructor(readonly path: string) {}

  /** A new repository at `path` (created), its branch `main`. */
  static async init(path: string): Promise<ConfigProject> {
    await mkdir(path, { recursive: true });
    const project = new ConfigProject(path);
    await project.git("init", "--quiet");
    await project.git("symbolic-ref", "HEAD", "refs/heads/main"); // any git version, any init.defaultBranch
    return project;
  }

  async git(...args: string[]): Promise<string> {
    const { stdout } = await run("git", args, { cwd: this.path, env: gitEnv() });
    return stdout.trim();
  }

  /** Writes `file` (relative path) and commits it; returns the commit id. */
  async commit(file: string, content: string, message: string): Promise<string> {
    await mkdir(dirname(join(this.path, file)), { recursive: true });
    await writeFile(join(this.path, file), content);
    await this.git("add", "--", file);
    await this.git("commit", "--quiet", "--no-verify", "-m", message);
    return this.git("rev-parse", "HEAD");
  }
}
