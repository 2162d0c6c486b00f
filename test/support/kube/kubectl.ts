import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { within } from "../until.ts";
import type { KubeApiServer } from "./server.ts";

export const KUBECTL = "/usr/bin/kubectl";

export interface KubectlResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A long-running kubectl (`get -w`, `logs -f`, `rollout status`) whose output is read line by line. */
export interface KubectlProcess {
  readonly lines: string[];
  /** Resolves with the first line (already printed or yet to come) that matches, within `ms`. */
  line(match: RegExp | string, ms?: number): Promise<string>;
  /** Resolves when it exits on its own, within `ms`. */
  exited(ms?: number): Promise<KubectlResult>;
  /** Sends a signal (SIGINT: a clean stop, as Ctrl-C); `exited()` then says how it ended. */
  kill(signal: NodeJS.Signals): void;
  stop(): Promise<void>;
}

export interface Kubectl {
  /** The temporary HOME (kubeconfig, discovery cache) of this kubectl. */
  readonly home: string;
  run(args: string[], options?: { input?: string; timeoutMs?: number }): Promise<KubectlResult>;
  /** `env` adds to the environment (e.g. KUBECTL_PORT_FORWARD_WEBSOCKETS=false). */
  start(args: string[], options?: { env?: Record<string, string> }): KubectlProcess;
  close(): Promise<void>;
}

/**
 * The real kubectl pointed at a test server: a kubeconfig written for it in a temporary HOME
 * (nothing of the machine's own configuration or cache leaks in), a request timeout, and a
 * process timeout so a hang fails the test instead of stalling it. `server` is the Kubernetes
 * test server, or anything else that writes a kubeconfig (e.g. for kas's Kubernetes API proxy).
 */
export async function kubectlFor(
  server: Pick<KubeApiServer, "writeKubeconfig">,
  namespace?: string,
): Promise<Kubectl> {
  const home = await mkdtemp(join(tmpdir(), "kubectl-"));
  const kubeconfig = await server.writeKubeconfig(join(home, "kubeconfig"), {
    ...(namespace && { namespace }),
  });
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, KUBECONFIG: kubeconfig };
  const children = new Set<ChildProcess>();
  const argv = (args: string[]) => ["--request-timeout=10s", ...args];
  return {
    home,
    run(args, options = {}) {
      return new Promise((resolve) => {
        const child = execFile(
          KUBECTL,
          argv(args),
          { env, timeout: options.timeoutMs ?? 20_000, killSignal: "SIGKILL" },
          (err, stdout, stderr) => {
            children.delete(child);
            const code = err ? (typeof err.code === "number" ? err.code : null) : 0;
            resolve({ code, stdout, stderr });
          },
        );
        children.add(child);
        child.stdin?.end(options.input ?? "");
      });
    },
    start(args, options = {}) {
      // No request timeout: a watch runs until it is stopped.
      const child = spawn(KUBECTL, args, {
        env: { ...env, ...options.env },
        stdio: ["ignore", "pipe", "pipe"],
      });
      children.add(child);
      const lines: string[] = [];
      let stdout = "";
      let stderr = "";
      let partial = "";
      const waiters = new Set<() => void>();
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
        stdout += chunk;
        const parts = (partial + chunk).split("\n");
        partial = parts.pop() ?? "";
        lines.push(...parts);
        for (const w of waiters) w();
      });
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
        stderr += chunk;
      });
      let closed = false;
      const exit = new Promise<KubectlResult>((resolve) =>
        child.once("close", (code) => {
          children.delete(child);
          closed = true;
          if (partial !== "") lines.push(partial);
          for (const w of waiters) w();
          resolve({ code, stdout, stderr });
        }),
      );
      const matches = (l: string, m: RegExp | string) => (typeof m === "string" ? l.includes(m) : m.test(l));
      return {
        lines,
        line(match, ms = 15_000) {
          const found = new Promise<string>((resolve, reject) => {
            const check = () => {
              const hit = lines.find((l) => matches(l, match));
              if (hit !== undefined) {
                waiters.delete(check);
                resolve(hit);
              } else if (closed) {
                waiters.delete(check);
                reject(
                  new Error(
                    `kubectl exited (${stderr.trim()}) without printing ${match}; it printed ${JSON.stringify(lines)}`,
                  ),
                );
              }
            };
            waiters.add(check);
            check();
          });
          return within(
            found,
            ms,
            `a line ${match} from kubectl ${args.join(" ")}; so far ${JSON.stringify(lines)} ${stderr}`,
          );
        },
        exited: (ms = 15_000) =>
          within(exit, ms, `kubectl ${args.join(" ")} to exit; so far ${JSON.stringify(lines)} ${stderr}`),
        kill(signal) {
          if (!closed) child.kill(signal);
        },
        async stop() {
          if (!closed) child.kill("SIGKILL");
          await exit;
        },
      };
    },
    async close() {
      for (const c of children) c.kill("SIGKILL");
      await rm(home, { recursive: true, force: true });
    },
  };
}
