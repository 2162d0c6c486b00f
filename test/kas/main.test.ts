import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { exitCode, runMain } from "../support/run-main.ts";
import { writeGitlabExample } from "./support/gitlab-example.ts";
import { portsEnv, spawnKas } from "./support/kas-process.ts";

const MAIN = join(import.meta.dirname, "../../cmd/kas/main.ts");
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "kas-main-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const run = (args: string[], env: NodeJS.ProcessEnv = {}) => runMain(MAIN, args, env);

describe("kas main", () => {
  test("--help prints usage and exits 0", async () => {
    const child = run(["--help"]);
    expect(await exitCode(child)).toBe(0);
    expect(child.out()).toMatch(/^Usage: kas \[--config kas\.yaml\]/);
  });

  test("bad configuration: exit 2, every problem on stderr naming its field", async () => {
    const config = join(dir, "bad.yaml");
    await writeFile(config, "agent:\n  listen:\n    address: nope\n");
    const child = run(["--config", config], { KAS_OBSERVABILITY_LOGGING_LEVEL: "loud" });
    expect(await exitCode(child)).toBe(2);
    expect(child.err()).toContain('agent.listen.address: expected host:port, got "nope" (from bad.yaml)');
    expect(child.err()).toContain("observability.logging.level: expected one of");
    expect(child.err()).toContain("(from KAS_OBSERVABILITY_LOGGING_LEVEL)");
    expect(child.err()).toContain("gitlab.address: required");
  });

  test("a good configuration: observability up with probes and metrics; SIGTERM exits 0", async () => {
    const tokens = join(dir, "tokens.yaml");
    await writeFile(tokens, "dev-token: {agentId: 1, projectId: 1, agentName: dev}\n");
    const kas = await spawnKas({ ...portsEnv(), KAS_AGENT_STATIC_TOKENS_FILE: tokens });
    try {
      const ready = await fetch(`${kas.addresses.observability}/readiness`);
      expect(ready.status).toBe(200);
      const metrics = await (await fetch(`${kas.addresses.observability}/metrics`)).text();
      expect(metrics).toContain("# TYPE kas_tunnels gauge");
      expect(metrics).toContain("# TYPE kas_agent_authentications_total counter");
      expect(metrics).toContain("# TYPE kas_agent_handshakes_pending gauge");
      kas.child.kill("SIGTERM");
      expect(await kas.exitCode()).toBe(0);
      expect(kas.out()).toContain('"msg":"shutting down"');
    } finally {
      kas.kill();
    }
  });

  test("GitLab's kas flag and example configuration: kas starts and names each setting it does not act on, once", async () => {
    const config = await writeGitlabExample(dir);
    // The example's GitLab and Redis are not there: kas starts anyway (agents are refused, routing
    // stays local until Redis answers); listeners go on free ports instead of the example's.
    const child = run(["--configuration-file", config], portsEnv());
    try {
      await waitFor(
        () => child.out().includes('"msg":"kas listening"'),
        () => child.err(),
      );
      const warnings = child
        .out()
        .split("\n")
        .filter((l) => l.includes('"level":40'))
        .map((l) => JSON.parse(l).msg as string);
      expect(warnings).toContain(
        "observability.sentry is GitLab's setting; this kas does not send errors to Sentry",
      );
      expect(warnings).toContain(
        "gitlab.api_rate_limit is GitLab's setting; this kas does not rate-limit its calls to GitLab (it caches GitLab's answers: agent.info_cache_ttl)",
      );
      const notUsed = warnings.filter((w) => / GitLab's settings?; /.test(w));
      expect(notUsed).toHaveLength(13);
      expect(new Set(notUsed).size).toBe(notUsed.length);
      child.kill("SIGTERM");
      expect(await exitCode(child)).toBe(0);
    } finally {
      child.kill("SIGKILL");
    }
  });
});

async function waitFor(done: () => boolean, why: () => string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out; stderr: ${why()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
