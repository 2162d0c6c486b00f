import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { closedPort } from "../../support/ports.ts";
import { exitCode, jsonLines, runMain } from "../../support/run-main.ts";
import { until } from "../../support/until.ts";
import { portsEnv } from "../support/kas-process.ts";

const ROOT = join(import.meta.dirname, "../../..");
const FAIL_ON_SIGNAL = join(import.meta.dirname, "fail-on-signal.mjs");

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "process-errors-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A daemon's main.ts with the bug-playing preload; its stdout lines parsed as JSON. */
function spawnDaemon(main: string, args: string[], env: NodeJS.ProcessEnv) {
  const child = runMain(main, args, env, { preload: FAIL_ON_SIGNAL });
  const lines = () =>
    jsonLines<{
      level: number;
      msg: string;
      err?: { message?: string };
      addresses?: { observability: string };
      url?: string;
    }>(child.out());
  return { child, lines };
}

/** Both daemons: an unhandled rejection is logged and they run on; an uncaught exception is logged, fatal, exit 1. */
async function checkPolicy(
  { child, lines }: ReturnType<typeof spawnDaemon>,
  started: string,
  live: () => Promise<boolean>,
) {
  try {
    await until(() => lines().some((l) => l.msg === started), 20_000, started);
    child.kill("SIGUSR2");
    await until(() => lines().some((l) => l.msg.startsWith("unhandled promise rejection")), 5000, "log");
    expect(lines().find((l) => l.msg.startsWith("unhandled promise rejection"))).toMatchObject({
      level: 50,
      err: { message: "a promise nobody awaited" },
    });
    expect(await live()).toBe(true);
    expect(child.exitCode).toBeNull();

    child.kill("SIGUSR2");
    expect(await exitCode(child)).toBe(1);
    expect(lines().find((l) => l.msg.startsWith("uncaught exception"))).toMatchObject({
      level: 60,
      err: { message: "a callback that threw" },
      origin: "uncaughtException",
    });
  } finally {
    child.kill("SIGKILL");
  }
}

const answers = async (url: string) => (await fetch(url)).status === 200;

describe("process error policy (both daemons, as processes)", () => {
  test("kas", async () => {
    const tokens = join(dir, "tokens.yaml");
    await writeFile(tokens, "dev-token: {agentId: 1, projectId: 1, agentName: dev}\n");
    const kas = spawnDaemon(join(ROOT, "cmd/kas/main.ts"), [], {
      ...portsEnv(),
      KAS_AGENT_STATIC_TOKENS_FILE: tokens,
    });
    // Listeners on port 0: where observability ended up is in the "kas listening" line.
    const observability = () => kas.lines().find((l) => l.msg === "kas listening")?.addresses?.observability;
    await checkPolicy(kas, "kas listening", () => answers(`${observability()}/liveness`));
  });

  test("agentk", async () => {
    const tokenFile = join(dir, "token");
    await writeFile(tokenFile, "glagent-Mn4bV7cX1zL8kJ5hG2fD9sA0");
    const agentk = spawnDaemon(
      join(ROOT, "cmd/agentk/main.ts"),
      ["--kas-address", `ws://127.0.0.1:${await closedPort()}`, "--token-file", tokenFile],
      { AGENTK_OBSERVABILITY_LISTEN_ADDRESS: "127.0.0.1:0", POD_NAME: "agentk-0" },
    );
    const observability = () => agentk.lines().find((l) => l.msg === "agentk starting")?.url;
    await checkPolicy(agentk, "agentk starting", () => answers(`${observability()}/liveness`));
  });
});
