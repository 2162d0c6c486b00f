// Drives link-process.ts from the benchmark: one command at a time, each awaited.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import type { LinkOptions, LinkStats } from "../lib/link.ts";
import type { LinkCommand } from "./link-process.ts";

export interface Links {
  create(name: string, options: LinkOptions): Promise<Required<LinkOptions>>;
  /** The port on which a connection reaches 127.0.0.1:`port` through link `name`. */
  forward(name: string, port: number): Promise<number>;
  stats(name: string): Promise<LinkStats>;
  close(): Promise<void>;
}

export function startLinks(execArgv: string[] = []): Links {
  const child = spawn(
    process.execPath,
    [...execArgv, "--import", "tsx", new URL("./link-process.ts", import.meta.url).pathname],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  let queue = Promise.resolve();
  const call = <T>(cmd: LinkCommand): Promise<T> => {
    const answer = queue.then(async () => {
      child.stdin!.write(`${JSON.stringify(cmd)}\n`);
      const { value, done } = await lines.next();
      if (done) throw new Error("link process exited");
      const reply = JSON.parse(value) as { ok?: T; error?: string };
      if (reply.error !== undefined) throw new Error(`link process: ${reply.error}`);
      return reply.ok as T;
    });
    queue = answer.then(
      () => {},
      () => {},
    );
    return answer;
  };
  return {
    create: (name, options) => call({ op: "link", name, options }),
    forward: async (name, port) => (await call<{ port: number }>({ op: "forward", name, port })).port,
    stats: (name) => call({ op: "stats", name }),
    async close() {
      child.stdin!.end();
      if (child.exitCode === null) await once(child, "exit");
    },
  };
}
