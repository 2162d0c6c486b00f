// Runs the `git` CLI for the local backend: no shell, a clean environment, one repository per
// call (no discovery above it), a timeout and the caller's signal, bounded output, and at most
// `concurrency` processes at once. Failures come back as RepositoryErrors.
import { type ExecFileException, execFile } from "node:child_process";
import { dirname, resolve } from "node:path";
import { RepositoryError } from "../../../modules/runtime/repositories.ts";
import { Semaphore } from "./semaphore.ts";

export interface GitRunnerOptions {
  /** The git executable. Default "git" (from PATH). */
  gitBinary?: string;
  /** Deadline for one git process, ms. Default 30 000. */
  timeoutMs?: number;
  /** Git processes running at once, per runner. Default 8. */
  concurrency?: number;
}

export interface GitRun {
  /** The repository: a bare repository, or a work tree's top directory. */
  readonly repo: string;
  readonly args: readonly string[];
  /** Written to git's stdin (then closed). */
  readonly input?: string;
  /** Largest stdout accepted; more -> `too_large`. */
  readonly maxBytes: number;
  /** Exit codes that are answers, not failures (e.g. 1 for `symbolic-ref -q` on a detached HEAD). */
  readonly okExitCodes?: readonly number[];
  readonly signal?: AbortSignal | undefined;
}

export interface GitResult {
  readonly exitCode: number;
  readonly stdout: Buffer;
}

// The parent's GIT_* variables (GIT_DIR, GIT_INDEX_FILE from a hook, ...) would redirect git.
function gitEnv(repo: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("GIT_")) env[k] = v;
  return {
    ...env,
    // Stable messages to match on.
    LC_ALL: "C",
    // A path that is not a repository must not resolve to a repository around it.
    GIT_CEILING_DIRECTORIES: dirname(repo),
    GIT_TERMINAL_PROMPT: "0",
    GIT_OPTIONAL_LOCKS: "0",
    GIT_NO_REPLACE_OBJECTS: "1",
    GIT_CONFIG_NOSYSTEM: "1",
  };
}

export class GitRunner {
  readonly #git: string;
  readonly #timeoutMs: number;
  readonly #slots: Semaphore;

  constructor(opts: GitRunnerOptions = {}) {
    this.#git = opts.gitBinary ?? "git";
    this.#timeoutMs = opts.timeoutMs ?? 30_000;
    this.#slots = new Semaphore(opts.concurrency ?? 8);
  }

  /** Calls waiting for a free process slot. */
  get waiting(): number {
    return this.#slots.waiting;
  }

  async run(call: GitRun): Promise<GitResult> {
    const what = `git ${call.args[0]} in ${call.repo}`;
    try {
      return await this.#slots.run(() => this.#spawn(call, what), call.signal);
    } catch (err) {
      if (err instanceof RepositoryError) throw err;
      // Only the semaphore throws anything else: the signal aborted while queued.
      throw new RepositoryError("aborted", `${what}: abandoned while waiting for a git process slot`, {
        cause: err,
      });
    }
  }

  #spawn(call: GitRun, what: string): Promise<GitResult> {
    const repo = resolve(call.repo);
    return new Promise((resolvePromise, reject) => {
      const child = execFile(
        this.#git,
        ["-C", repo, ...call.args],
        {
          encoding: "buffer",
          env: gitEnv(repo),
          timeout: this.#timeoutMs,
          killSignal: "SIGKILL",
          maxBuffer: call.maxBytes,
          signal: call.signal,
          windowsHide: true,
        },
        (err, stdout, stderr) => {
          if (!err) return resolvePromise({ exitCode: 0, stdout });
          const code = typeof err.code === "number" ? err.code : undefined;
          if (code !== undefined && call.okExitCodes?.includes(code)) {
            return resolvePromise({ exitCode: code, stdout });
          }
          reject(this.#toRepositoryError(err, stderr.toString("utf8").trim(), call, what));
        },
      );
      // git may exit before reading its input (a bad repository): that EPIPE is not the error.
      child.stdin?.on("error", () => {});
      child.stdin?.end(call.input ?? "");
    });
  }

  #toRepositoryError(err: ExecFileException, stderr: string, call: GitRun, what: string): RepositoryError {
    const cause = { cause: err };
    if (err.name === "AbortError") return new RepositoryError("aborted", `${what}: abandoned`, cause);
    if (err.code === "ERR_CHILD_PROCESS_STDIO_MAXBUFFER") {
      return new RepositoryError("too_large", `${what}: output over ${call.maxBytes} bytes`, cause);
    }
    // execFile's own timeout is the only thing that kills the process otherwise.
    if (err.killed) {
      return new RepositoryError("aborted", `${what}: timed out after ${this.#timeoutMs} ms`, cause);
    }
    if (err.code === "ENOENT") {
      return new RepositoryError("failed", `git executable not found: ${this.#git}`, cause);
    }
    if (/not a git repository|cannot change to/i.test(stderr)) {
      return new RepositoryError("not_found", `not a git repository: ${call.repo}`, cause);
    }
    const detail = stderr.split("\n")[0] || `exit code ${err.code ?? err.signal}`;
    return new RepositoryError("failed", `${what}: ${detail}`, cause);
  }
}
