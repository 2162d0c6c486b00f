// Ctrl-C on `npm run demo`, as a terminal delivers it: SIGINT to the whole foreground process
// group (npm, the shell it runs the script with, node). The demo stops agentk, then kas, reports
// each clean exit, and npm exits 0 (not 130: the script runs under `exec`, so no shell dies of the
// signal, and without tsx's CLI, which takes a second SIGINT, npm's forwarded copy, as "force").
import { spawn } from "node:child_process";
import { once } from "node:events";
import { expect, test } from "vitest";
import { until, within } from "../support/until.ts";

test("Ctrl-C on npm run demo: agentk and kas exit cleanly, so does npm", async () => {
  const child = spawn("npm", ["run", "demo"], {
    cwd: new URL("../..", import.meta.url).pathname,
    env: { ...process.env, KUBECONFIG: "/nonexistent/kubeconfig" },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true, // a process group of its own, as a terminal's foreground job
  });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => {
    out += d;
  });
  child.stderr!.on("data", (d: Buffer) => {
    out += d;
  });
  const exited = once(child, "exit") as Promise<[number | null, NodeJS.Signals | null]>;
  try {
    // Both daemons up (agentk has connected to kas): the demo is mid-round when Ctrl-C comes.
    await until(
      () => /agentk\s+connected: /.test(out) || child.exitCode !== null,
      90_000,
      "agentk connected to kas",
    );
    expect(child.exitCode).toBeNull();
    process.kill(-child.pid!, "SIGINT");
    const [code, signal] = await within(exited, 30_000, "npm run demo to exit").catch((err: Error) => {
      // Which daemon held on is in what they said.
      throw new Error(`${err.message}; the demo said:\n${out.slice(-4000)}`);
    });
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    expect(out).toMatch(/agentk exited with code 0/);
    expect(out).toMatch(/kas exited with code 0/);
  } finally {
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, "SIGKILL");
  }
}, 150_000);
