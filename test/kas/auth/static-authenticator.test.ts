import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  loadStaticTokens,
  parseStaticTokens,
  StaticTokenAuthenticator,
} from "../../../cmd/kas/auth/index.ts";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "kas-static-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("StaticTokenAuthenticator", () => {
  test("YAML file: known tokens map to their agents, ids as strings", async () => {
    const path = join(dir, "tokens.yaml");
    await writeFile(
      path,
      "dev-token-1:\n  agentId: 1\n  projectId: 10\n  agentName: dev\n'dev-token-2': {agentId: '2', projectId: '20', agentName: staging}\n",
    );
    const auth = await loadStaticTokens(path);
    expect(auth.size).toBe(2);
    await expect(auth.authenticateAgent("dev-token-1")).resolves.toEqual({
      agentId: "1",
      projectId: "10",
      agentName: "dev",
    });
    await expect(auth.authenticateAgent("dev-token-2")).resolves.toEqual({
      agentId: "2",
      projectId: "20",
      agentName: "staging",
    });
  });

  test("JSON file works too", async () => {
    const path = join(dir, "tokens.json");
    await writeFile(path, JSON.stringify({ "json-token": { agentId: 5, projectId: 6, agentName: "j" } }));
    await expect((await loadStaticTokens(path)).authenticateAgent("json-token")).resolves.toMatchObject({
      agentId: "5",
    });
  });

  test.each([
    ["an unknown token", "nope"],
    ["a prefix of a known token", "dev-token"],
    ["a known token with a suffix", "dev-token-1x"],
    ["the empty string", ""],
  ])("%s: unauthenticated", async (_, token) => {
    const auth = new StaticTokenAuthenticator({
      "dev-token-1": { agentId: "1", projectId: "1", agentName: "a" },
    });
    await expect(auth.authenticateAgent(token)).rejects.toMatchObject({
      code: "unauthenticated",
      httpStatus: 401,
    });
  });

  test("returned infos are copies: callers cannot alter the table", async () => {
    const auth = new StaticTokenAuthenticator({ t: { agentId: "1", projectId: "1", agentName: "a" } });
    const info = await auth.authenticateAgent("t");
    info.agentName = "changed";
    await expect(auth.authenticateAgent("t")).resolves.toMatchObject({ agentName: "a" });
  });

  test.each([
    ["not a mapping", "- a\n- b\n", "expected a mapping of token -> {agentId, projectId, agentName}"],
    [
      "a bad id",
      "secret-tok-1: {agentId: x, projectId: 1, agentName: a}\n",
      "entry #1: agentId: expected a positive integer id",
    ],
    [
      "a missing name",
      "ok: {agentId: 1, projectId: 1, agentName: a}\nsecret-tok-2: {agentId: 1, projectId: 1}\n",
      "entry #2: agentName",
    ],
    ["not YAML", "a: [\n", "not valid YAML or JSON"],
    [
      "invalid YAML after a token",
      "secret-tok-3: {agentId: 1, projectId: 2, agentName: x\nother: [",
      "not valid YAML or JSON at line 2, column 1",
    ],
  ])("a file with %s is refused with a message that never shows a token", (_, text, message) => {
    let err: Error | undefined;
    try {
      parseStaticTokens(text, "tokens.yaml");
    } catch (e) {
      err = e as Error;
    }
    expect(err?.message).toContain(message);
    expect(err?.message).toContain("tokens.yaml");
    expect(err?.message).not.toMatch(/secret-tok/);
  });

  test("a missing file: the error names it", async () => {
    await expect(loadStaticTokens(join(dir, "missing.yaml"))).rejects.toThrow(
      /missing\.yaml: cannot read: ENOENT/,
    );
  });
});
