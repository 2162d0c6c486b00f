// readProjectFiles against a real git repository (the local backend), with small limits: which files
// it lists and reads, and when it gives up on one batch and leaves each agent to read its own.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { LocalGitRepositories } from "../../../cmd/kas/repositories/local-git.ts";
import {
  type ProjectFilesLimits,
  readProjectFiles,
} from "../../../modules/agent_configuration/kas/project-files.ts";
import {
  RepositoryError,
  type RepositoryLocation,
  type RepositoryReader,
} from "../../../modules/runtime/index.ts";
import { GitRepo } from "../../support/git-repo.ts";

const ctx = { agentId: "1" };
const limits: ProjectFilesLimits = { maxFileBytes: 100, maxTotalBytes: 1000, maxFiles: 10, maxOversized: 3 };
const big = `# ${"x".repeat(200)}\n`;

/** The real reader, recording its listings' directories and counting its batches. */
function recording(overrides: Partial<RepositoryReader> = {}) {
  const inner = new LocalGitRepositories();
  const seen = { listed: [] as string[], batches: 0 };
  const reader: RepositoryReader = {
    resolveRef: (...a) => inner.resolveRef(...a),
    readFile: (...a) => inner.readFile(...a),
    readFiles: (...a) => {
      seen.batches++;
      return (overrides.readFiles ?? inner.readFiles.bind(inner))(...a);
    },
    listFiles: (location, commit, dir, c) => {
      seen.listed.push(dir);
      return (overrides.listFiles ?? inner.listFiles.bind(inner))(location, commit, dir, c);
    },
    close: () => inner.close(),
  };
  return { reader, seen };
}

describe("readProjectFiles", () => {
  let repo: GitRepo;
  let location: RepositoryLocation;
  let commit: string;
  let empty: string;

  beforeAll(async () => {
    repo = await GitRepo.init();
    location = { backend: "local", path: repo.path };
    empty = await repo.commit({ "README.md": "no agents\n", ".gitlab/agents/README.md": "none yet\n" });
    commit = await repo.commit({
      ".gitlab/agents/a/config.yaml": "a: 1\n",
      ".gitlab/agents/b/config.yaml": "b: 2\n",
      // Not configuration files: never read (each is over maxFileBytes: read, it would cost a batch).
      ".gitlab/agents/a/config.yaml.orig": big,
      ".gitlab/agents/a/manifests/config.yaml": big,
      ".gitlab/agents/a/manifests/deploy.yaml": big,
      "other/.gitlab/agents/c/config.yaml": big,
    });
  });
  afterAll(async () => {
    await repo?.remove();
  });

  test("lists .gitlab/agents and reads its <name>/config.yaml files in one batch", async () => {
    const { reader, seen } = recording();
    const files = await readProjectFiles(reader, location, commit, limits, ctx);
    expect(files.perAgent).toBeUndefined();
    if (files.perAgent !== undefined) return;
    expect(Object.fromEntries([...files.files].map(([p, b]) => [p, b.toString()]))).toEqual({
      ".gitlab/agents/a/config.yaml": "a: 1\n",
      ".gitlab/agents/b/config.yaml": "b: 2\n",
    });
    expect(files.oversized.size).toBe(0);
    expect(seen).toEqual({ listed: [".gitlab/agents"], batches: 1 });
  });

  test("no configuration file: no batch at all", async () => {
    const { reader, seen } = recording();
    const files = await readProjectFiles(reader, location, empty, limits, ctx);
    expect(files).toMatchObject({ commit: empty, files: new Map(), oversized: new Set() });
    expect(seen.batches).toBe(0);
  });

  test("more files than maxFiles: per agent", async () => {
    const { reader, seen } = recording();
    expect(await readProjectFiles(reader, location, commit, { ...limits, maxFiles: 1 }, ctx)).toEqual({
      commit,
      perAgent: "2 configuration files, over 1",
    });
    expect(seen.batches).toBe(0);
    const exactly = await readProjectFiles(reader, location, commit, { ...limits, maxFiles: 2 }, ctx);
    expect(exactly.perAgent).toBeUndefined();
  });

  test("the files over maxTotalBytes together: per agent", async () => {
    const { reader } = recording();
    const files = await readProjectFiles(reader, location, commit, { ...limits, maxTotalBytes: 9 }, ctx);
    expect(files.perAgent).toMatch(/over 9/);
  });

  test("an oversized file is left out, one more batch each, up to maxOversized", async () => {
    const c = await repo.commit({
      ".gitlab/agents/a/config.yaml": big,
      ".gitlab/agents/b/config.yaml": "b: 2\n",
      ".gitlab/agents/c/config.yaml": big,
    });
    const within = recording();
    const files = await readProjectFiles(within.reader, location, c, { ...limits, maxOversized: 2 }, ctx);
    expect(files).toMatchObject({
      files: new Map([[".gitlab/agents/b/config.yaml", Buffer.from("b: 2\n")]]),
      oversized: new Set([".gitlab/agents/a/config.yaml", ".gitlab/agents/c/config.yaml"]),
    });
    expect(within.seen.batches).toBe(3);
    const past = recording();
    const given = await readProjectFiles(past.reader, location, c, { ...limits, maxOversized: 1 }, ctx);
    expect(given.perAgent).toContain(".gitlab/agents/c/config.yaml");
    expect(past.seen.batches).toBe(2);
  });

  test("a too_large error naming a path not asked for: per agent at once", async () => {
    const { reader, seen } = recording({
      readFiles: async () => {
        throw new RepositoryError("too_large", "elsewhere is too large", { path: "elsewhere" });
      },
    });
    expect(await readProjectFiles(reader, location, commit, limits, ctx)).toEqual({
      commit,
      perAgent: "elsewhere is too large",
    });
    expect(seen.batches).toBe(1);
  });

  test("a listing too large: per agent; any other error of the listing or the batch is thrown", async () => {
    const tooLarge = recording({
      listFiles: async () => {
        throw new RepositoryError("too_large", "over 100000 entries");
      },
    });
    const files = await readProjectFiles(tooLarge.reader, location, commit, limits, ctx);
    expect(files).toEqual({ commit, perAgent: ".gitlab/agents is too large to list: over 100000 entries" });
    expect(tooLarge.seen.batches).toBe(0);

    const unavailable = new RepositoryError("unavailable", "Gitaly is away");
    const listing = recording({
      listFiles: async () => {
        throw unavailable;
      },
    });
    await expect(readProjectFiles(listing.reader, location, commit, limits, ctx)).rejects.toBe(unavailable);
    const batch = recording({
      readFiles: async () => {
        throw unavailable;
      },
    });
    await expect(readProjectFiles(batch.reader, location, commit, limits, ctx)).rejects.toBe(unavailable);
  });
});
