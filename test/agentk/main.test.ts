import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { closedPort } from "../support/ports.ts";
import { exitCode, runMain } from "../support/run-main.ts";

const MAIN = join(import.meta.dirname, "../../cmd/agentk/main.ts");
const TOKEN = "glagent-Mn4bV7cX1zL8kJ5hG2fD9sA0";
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "agentk-main-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const run = (args: string[], env: NodeJS.ProcessEnv = {}) => runMain(MAIN, args, env);

describe("agentk main", () => {
  test("--help prints usage and exits 0", async () => {
    const child = run(["--help"]);
    expect(await exitCode(child)).toBe(0);
    expect(child.out()).toMatch(/^Usage: agentk --kas-address/);
  });

  test("no configuration: exit 2 saying what is missing", async () => {
    const child = run([]);
    expect(await exitCode(child)).toBe(2);
    expect(child.err()).toContain("--kas-address: required");
    expect(child.err()).toContain("--token-file: required");
  });

  test("configured: observability on its port, the token never printed; SIGTERM exits 0", async () => {
    const tokenFile = join(dir, "token");
    await writeFile(tokenFile, TOKEN);
    const child = run(
      // Nothing listens on that port: agentk keeps retrying, which is all this test needs.
      [
        "--kas-address",
        `ws://127.0.0.1:${await closedPort()}`,
        "--token-file",
        tokenFile,
        "--log-level",
        "trace",
      ],
      { AGENTK_OBSERVABILITY_LISTEN_ADDRESS: "127.0.0.1:0", POD_NAME: "agentk-0" },
    );
    try {
      while (!child.out().includes("agentk starting")) {
        await once(child.stdout!, "data", { signal: AbortSignal.timeout(20_000) });
      }
      // Port 0: where observability ended up is in the "agentk starting" line.
      const started = child
        .out()
        .split("\n")
        .find((l) => l.includes('"msg":"agentk starting"'))!;
      const url = (JSON.parse(started) as { url: string }).url;
      expect((await fetch(`${url}/liveness`)).status).toBe(200);
      const metrics = await (await fetch(`${url}/metrics`)).text();
      expect(metrics).toContain("# TYPE agentk_tunnels gauge");
      expect(metrics).not.toContain("agentk_connected_agents");
      child.kill("SIGTERM");
      expect(await exitCode(child)).toBe(0);
      expect(child.out()).toContain('"pod":"agentk-0"');
      expect(child.out() + child.err()).not.toContain(TOKEN);
    } finally {
      child.kill("SIGKILL");
    }
  });
});
