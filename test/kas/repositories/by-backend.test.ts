// The reader in front of both backends: calls go to the backend the location names, and what a
// call names (refs, commits, paths) is checked once, the same for both, before any backend sees it.
import { describe, expect, test } from "vitest";
import { RepositoriesByBackend } from "../../../cmd/kas/repositories/by-backend.ts";
import {
  RepositoryError,
  type RepositoryLocation,
  type RepositoryReader,
} from "../../../modules/runtime/index.ts";

function recording(name: string, calls: string[]): RepositoryReader {
  const call = <T>(line: string, result: T): T => {
    calls.push(line);
    return result;
  };
  return {
    resolveRef: async (_l, ref) => call(`${name}.resolveRef ${JSON.stringify(ref)}`, "a".repeat(40)),
    readFile: async (_l, c, p) => call(`${name}.readFile ${c.slice(0, 4)} ${p}`, Buffer.from("x")),
    readFiles: async (_l, c, paths) =>
      call(`${name}.readFiles ${c.slice(0, 4)} ${paths.join(",")}`, new Map<string, Buffer>()),
    listFiles: async (_l, c, d) => call(`${name}.listFiles ${c.slice(0, 4)} ${d}`, []),
    close: async () => void calls.push(`${name}.close`),
  };
}

const gitaly: RepositoryLocation = {
  backend: "gitaly",
  gitaly: { address: "tcp://gitaly:8075", features: {} },
  repository: {
    storageName: "default",
    relativePath: "p.git",
    glRepository: "project-1",
    glProjectPath: "g/p",
  },
};
const local: RepositoryLocation = { backend: "local", path: "/srv/p.git" };
const ctx = { agentId: "1" };
const COMMIT = "0123456789abcdef0123456789abcdef01234567";

describe("repositories by backend", () => {
  test("each call reaches the backend its location names", async () => {
    const calls: string[] = [];
    const reader = new RepositoriesByBackend({
      gitaly: recording("gitaly", calls),
      local: recording("local", calls),
    });
    await reader.resolveRef(gitaly, { branch: "main" }, ctx);
    await reader.readFile(local, COMMIT.toUpperCase(), "a/b.yaml", 10, ctx);
    await reader.listFiles(gitaly, COMMIT, "dir/", ctx);
    await reader.readFiles(gitaly, COMMIT.toUpperCase(), ["a.yaml", "b/c.yaml"], 10, ctx);
    await reader.readFiles(local, COMMIT, [], 10, ctx);
    await reader.close();
    expect(calls).toEqual([
      'gitaly.resolveRef {"branch":"main"}',
      "local.readFile 0123 a/b.yaml",
      "gitaly.listFiles 0123 dir",
      "gitaly.readFiles 0123 a.yaml,b/c.yaml",
      "local.readFiles 0123 ",
      "gitaly.close",
      "local.close",
    ]);
  });

  test.each([
    [
      "a branch that reads as an option",
      (r: RepositoryReader) => r.resolveRef(gitaly, { branch: "--upload-pack=x" }, ctx),
    ],
    ["a tag with ..", (r: RepositoryReader) => r.resolveRef(gitaly, { tag: "v1..v2" }, ctx)],
    [
      "a revision instead of a commit id",
      (r: RepositoryReader) => r.readFile(gitaly, "HEAD~1", "a.yaml", 10, ctx),
    ],
    ["a path out of the tree", (r: RepositoryReader) => r.readFile(gitaly, COMMIT, "../etc/passwd", 10, ctx)],
    [
      "a revision instead of a commit id, for several files",
      (r: RepositoryReader) => r.readFiles(local, "main", ["a.yaml"], 10, ctx),
    ],
    [
      "one path out of the tree among several",
      (r: RepositoryReader) => r.readFiles(gitaly, COMMIT, ["a.yaml", "b/../../x", "c.yaml"], 10, ctx),
    ],
    [
      "a path with a line feed among several",
      (r: RepositoryReader) => r.readFiles(local, COMMIT, ["a.yaml", "b\nHEAD:c"], 10, ctx),
    ],
    ["a moving ref to list", (r: RepositoryReader) => r.listFiles(gitaly, "main", "", ctx)],
  ])("%s is refused before any backend sees it", async (_, call) => {
    const calls: string[] = [];
    const reader = new RepositoriesByBackend({
      gitaly: recording("gitaly", calls),
      local: recording("local", calls),
    });
    const err = await call(reader).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RepositoryError);
    expect((err as RepositoryError).message).toMatch(/invalid/);
    expect(calls).toEqual([]);
  });
});
