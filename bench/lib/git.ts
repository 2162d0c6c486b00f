// The benchmarks' git: the CLI with an environment of its own (no system or user configuration, a
// fixed author), so that what a machine has configured cannot change what is measured.
import { execFileSync } from "node:child_process";

/** git's environment, with `home` as HOME. */
export function benchGitEnv(home: string): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: home,
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_AUTHOR_NAME: "bench",
    GIT_AUTHOR_EMAIL: "bench@example.com",
    GIT_COMMITTER_NAME: "bench",
    GIT_COMMITTER_EMAIL: "bench@example.com",
  };
}

/** `git -C <repo> <args>` with `input` on stdin and `env` added; its output, trimmed. */
export function benchGit(home: string) {
  const base = benchGitEnv(home);
  return (repo: string, args: string[], input = "", env: Record<string, string> = {}): string =>
    execFileSync("git", ["-C", repo, ...args], {
      env: { ...base, ...env },
      input,
      encoding: "utf8",
      maxBuffer: 64 << 20,
    }).trim();
}
