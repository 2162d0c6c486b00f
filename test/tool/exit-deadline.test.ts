// Both daemons, as processes, with a handle left open that their shutdown knows nothing of: they
// still exit after SIGTERM, saying what was left open.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { portsEnv } from "../kas/support/kas-process.ts";
import { closedPort } from "../support/ports.ts";
import { exitCode, jsonLines, runMain } from "../support/run-main.ts";
import { until } from "../support/until.ts";

const ROOT = join(import.meta.dirname, "../..");
const LEAK = join(import.meta.dirname, "leak-a-handle.mjs");

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "exit-deadline-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

type Line = { level: number; msg: string; open?: Record<string, number>; exitCode?: number };

async function leaksYetExits(main: string, args: string[], env: NodeJS.ProcessEnv, started: string) {
  const child = runMain(main, args, env, { preload: LEAK });
  const lines = () => jsonLines<Line>(child.out());
  try {
    await until(() => lines().some((l) => l.msg === started), 20_000, started);
    child.kill("SIGTERM");
    expect(await exitCode(child)).toBe(0); // the shutdown itself went well
    expect(lines().find((l) => l.msg.startsWith("stopped, but something is still open"))).toMatchObject({
      level: 50,
      exitCode: 0,
      open: { TCPServerWrap: 1 },
    });
  } finally {
    child.kill("SIGKILL");
  }
}

describe("a daemon that leaves a handle open still exits after its shutdown", () => {
  test("kas", async () => {
    const tokens = join(dir, "tokens.yaml");
    await writeFile(tokens, "dev-token: {agentId: 1, projectId: 1, agentName: dev}\n");
    await leaksYetExits(
      join(ROOT, "cmd/kas/main.ts"),
      [],
      { ...portsEnv(), KAS_AGENT_STATIC_TOKENS_FILE: tokens, KAS_SHUTDOWN_DRAIN_DELAY: "0s" },
      "kas listening",
    );
  });

  test("agentk", async () => {
    const tokenFile = join(dir, "token");
    await writeFile(tokenFile, "glagent-Mn4bV7cX1zL8kJ5hG2fD9sA0");
    await leaksYetExits(
      join(ROOT, "cmd/agentk/main.ts"),
      ["--kas-address", `ws://127.0.0.1:${await closedPort()}`, "--token-file", tokenFile],
      { AGENTK_OBSERVABILITY_LISTEN_ADDRESS: "127.0.0.1:0", POD_NAME: "agentk-0" },
      "agentk starting",
    );
  });
});
