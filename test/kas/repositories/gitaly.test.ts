// GitalyRepositories against the Gitaly test server over real git repositories: refs, files and
// listings, as kas's configuration and GitOps modules read them.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { GitalyRepositories } from "../../../cmd/kas/repositories/gitaly/index.ts";
import { RepositoryError, type RepositoryLocation } from "../../../modules/runtime/repositories.ts";
import { git, type TestRepo, TestStorage } from "../../support/git-repo.ts";
import { GitalyTestServer } from "../../support/gitaly-server.ts";

const TOKEN = "gitaly-secret-token";
const ctx = { agentId: "1" };

let storage: TestStorage;
let server: GitalyTestServer;
let reader: GitalyRepositories;
let repo: TestRepo;
let first: string;
let second: string;
let feature: string;
let annotatedTag: string;
const big = Buffer.alloc(300 * 1024, "x");

function location(relativePath: string): RepositoryLocation {
  return {
    backend: "gitaly",
    gitaly: { address: server.address, token: TOKEN, features: {} },
    repository: {
      storageName: "default",
      relativePath,
      glRepository: "project-1",
      glProjectPath: "group/project",
    },
  };
}

beforeAll(async () => {
  storage = await TestStorage.create();
  repo = await storage.init("group/project.git", "main");
  first = await repo.commit({
    ".gitlab/agents/a1/config.yaml": "gitops: {}\n",
    "manifests/app/deploy.yaml": "kind: Deployment\n",
    "manifests/app/svc.yaml": "kind: Service\n",
    "manifests/ns.yaml": "kind: Namespace\n",
    "README.md": "hello\n",
    "big.bin": big,
    "empty.txt": "",
  });
  second = await repo.commit({ "README.md": "hello again\n" });
  feature = await repo.commit({ "feature.txt": "f\n" }, "feature/x");
  annotatedTag = await repo.tag("v1.0", first, true);
  await repo.tag("light", second, false);
  await storage.init("group/empty.git", "main");
  server = await GitalyTestServer.start({ storages: { default: storage.root }, token: TOKEN });
  reader = new GitalyRepositories();
});

afterAll(async () => {
  await reader?.close();
  await server?.close();
  await storage?.remove();
});

describe("resolveRef", () => {
  test("the default branch (HEAD's symref), then after HEAD moves", async () => {
    expect(await reader.resolveRef(location("group/project.git"), {}, ctx)).toBe(second);
    const other = await storage.init("group/moved.git", "main");
    await other.commit({ a: "1" });
    const dev = await other.commit({ b: "2" }, "dev");
    await other.setDefaultBranch("dev");
    expect(await reader.resolveRef(location("group/moved.git"), {}, ctx)).toBe(dev);
  });

  test("a branch, including one with a slash", async () => {
    expect(await reader.resolveRef(location("group/project.git"), { branch: "main" }, ctx)).toBe(second);
    expect(await reader.resolveRef(location("group/project.git"), { branch: "feature/x" }, ctx)).toBe(
      feature,
    );
  });

  test("an annotated tag resolves to the commit it peels to, a lightweight one to its target", async () => {
    expect(annotatedTag).not.toBe(first);
    expect(await reader.resolveRef(location("group/project.git"), { tag: "v1.0" }, ctx)).toBe(first);
    expect(await reader.resolveRef(location("group/project.git"), { tag: "light" }, ctx)).toBe(second);
  });

  test("a commit id is checked with FindCommit", async () => {
    const before = server.calls("FindCommit");
    expect(await reader.resolveRef(location("group/project.git"), { commit: first }, ctx)).toBe(first);
    expect(server.calls("FindCommit")).toBe(before + 1);
    expect(
      await reader.resolveRef(location("group/project.git"), { commit: "0".repeat(40) }, ctx),
    ).toBeUndefined();
    // A tree id is an object, but not a commit.
    const tree = (await git(repo.dir, ["rev-parse", `${first}^{tree}`])).trim();
    expect(await reader.resolveRef(location("group/project.git"), { commit: tree }, ctx)).toBeUndefined();
    // Not a full id: never sent.
    expect(
      await reader.resolveRef(location("group/project.git"), { commit: first.slice(0, 8) }, ctx),
    ).toBeUndefined();
  });

  test("missing refs and an empty repository are undefined", async () => {
    const loc = location("group/project.git");
    expect(await reader.resolveRef(loc, { branch: "nope" }, ctx)).toBeUndefined();
    expect(await reader.resolveRef(loc, { tag: "nope" }, ctx)).toBeUndefined();
    expect(await reader.resolveRef(loc, { branch: "v1.0" }, ctx)).toBeUndefined();
    const empty = location("group/empty.git");
    expect(await reader.resolveRef(empty, {}, ctx)).toBeUndefined();
    expect(await reader.resolveRef(empty, { branch: "main" }, ctx)).toBeUndefined();
  });

  test("one InfoRefsUploadPack call per resolution, nothing else", async () => {
    const refs = server.calls("InfoRefsUploadPack");
    const others = server.calls("FindCommit") + server.calls("TreeEntry") + server.calls("GetTreeEntries");
    await reader.resolveRef(location("group/project.git"), { branch: "main" }, ctx);
    expect(server.calls("InfoRefsUploadPack")).toBe(refs + 1);
    expect(server.calls("FindCommit") + server.calls("TreeEntry") + server.calls("GetTreeEntries")).toBe(
      others,
    );
  });

  test("a missing repository is not_found, naming the address and project", async () => {
    const err = await reader.resolveRef(location("group/gone.git"), {}, ctx).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RepositoryError);
    expect((err as RepositoryError).code).toBe("not_found");
    expect((err as Error).message).toContain(server.address);
    expect((err as Error).message).toContain("group/project");
  });

  test("an advertisement over the limit is refused", async () => {
    const small = new GitalyRepositories({ maxAdvertisementBytes: 100 });
    try {
      const err = await small.resolveRef(location("group/project.git"), {}, ctx).catch((e: unknown) => e);
      expect((err as RepositoryError).code).toBe("too_large");
    } finally {
      await small.close();
    }
  });
});

describe("readFile", () => {
  test("a file's content at a commit", async () => {
    const loc = location("group/project.git");
    expect((await reader.readFile(loc, first, "README.md", 1024, ctx))?.toString()).toBe("hello\n");
    expect((await reader.readFile(loc, second, "README.md", 1024, ctx))?.toString()).toBe("hello again\n");
    expect((await reader.readFile(loc, first, ".gitlab/agents/a1/config.yaml", 1024, ctx))?.toString()).toBe(
      "gitops: {}\n",
    );
    expect(await reader.readFile(loc, first, "empty.txt", 1024, ctx)).toEqual(Buffer.alloc(0));
  });

  test("a file of exactly maxBytes is read whole, over several messages", async () => {
    const got = await reader.readFile(location("group/project.git"), first, "big.bin", big.length, ctx);
    expect(got?.equals(big)).toBe(true);
  });

  test("a missing path, a directory, a missing commit are undefined", async () => {
    const loc = location("group/project.git");
    expect(await reader.readFile(loc, first, "nope.yaml", 1024, ctx)).toBeUndefined();
    expect(await reader.readFile(loc, first, "manifests", 1024, ctx)).toBeUndefined();
    expect(await reader.readFile(loc, first, "feature.txt", 1024, ctx)).toBeUndefined();
    expect(await reader.readFile(loc, "1".repeat(40), "README.md", 1024, ctx)).toBeUndefined();
  });

  test("a file over maxBytes is too_large, without the server streaming it", async () => {
    const before = server.contentBytes("TreeEntry");
    const err = await reader
      .readFile(location("group/project.git"), first, "big.bin", 1000, ctx)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RepositoryError);
    expect((err as RepositoryError).code).toBe("too_large");
    expect((err as Error).message).toContain("big.bin");
    // The request's limit bounds what the server sends: at most maxBytes + 1 of the 300 KiB.
    expect(server.contentBytes("TreeEntry") - before).toBeLessThanOrEqual(1001);
  });

  test("a missing repository is not_found", async () => {
    const err = await reader
      .readFile(location("nope.git"), first, "README.md", 10, ctx)
      .catch((e: unknown) => e);
    expect((err as RepositoryError).code).toBe("not_found");
  });
});

describe("readFiles", () => {
  test("several files of a commit in one GetBlobs call, a large one over several messages", async () => {
    const loc = location("group/project.git");
    const calls = server.calls("GetBlobs");
    const treeEntries = server.calls("TreeEntry");
    const files = await reader.readFiles(
      loc,
      first,
      ["README.md", "manifests/ns.yaml", "big.bin", "empty.txt", "manifests/app/svc.yaml"],
      big.length,
      ctx,
    );
    expect([...files.keys()].sort()).toEqual([
      "README.md",
      "big.bin",
      "empty.txt",
      "manifests/app/svc.yaml",
      "manifests/ns.yaml",
    ]);
    expect(files.get("README.md")?.toString()).toBe("hello\n");
    expect(files.get("manifests/ns.yaml")?.toString()).toBe("kind: Namespace\n");
    expect(files.get("big.bin")?.equals(big)).toBe(true);
    expect(files.get("empty.txt")).toEqual(Buffer.alloc(0));
    expect(server.calls("GetBlobs") - calls).toBe(1);
    expect(server.calls("TreeEntry")).toBe(treeEntries);
    expect((await reader.readFiles(loc, second, ["README.md"], 100, ctx)).get("README.md")?.toString()).toBe(
      "hello again\n",
    );
  });

  test("missing paths and directories are absent; the rest are read", async () => {
    const loc = location("group/project.git");
    const files = await reader.readFiles(
      loc,
      first,
      ["nope.yaml", "README.md", "manifests", "feature.txt", "manifests/app/deploy.yaml"],
      1024,
      ctx,
    );
    expect([...files.keys()].sort()).toEqual(["README.md", "manifests/app/deploy.yaml"]);
  });

  test("an empty list is an empty map, without a call", async () => {
    const calls = server.calls("GetBlobs");
    expect(await reader.readFiles(location("group/project.git"), first, [], 1024, ctx)).toEqual(new Map());
    expect(server.calls("GetBlobs")).toBe(calls);
  });

  test("files over maxTotalBytes together are too_large", async () => {
    const loc = location("group/project.git");
    const both = ["README.md", "manifests/ns.yaml"]; // 6 + 16 bytes
    expect((await reader.readFiles(loc, first, both, 1024, ctx, 22)).size).toBe(2);
    const err = await reader.readFiles(loc, first, both, 1024, ctx, 21).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RepositoryError);
    expect(err).toMatchObject({ code: "too_large", path: undefined });
    expect((err as Error).message).toMatch(/over 21 bytes together/);
  });

  test("a file over maxBytesEach is too_large, naming it, without the server streaming it", async () => {
    const before = server.contentBytes("GetBlobs");
    const err = await reader
      .readFiles(location("group/project.git"), first, ["README.md", "big.bin", "empty.txt"], 1000, ctx)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RepositoryError);
    expect((err as RepositoryError).code).toBe("too_large");
    expect((err as Error).message).toMatch(/big\.bin at [0-9a-f]{40} is 307200 bytes, over 1000/);
    expect((err as RepositoryError).path).toBe("big.bin");
    // The request's limit bounds what the server sends per blob: README.md, then at most 1001 of big.bin.
    expect(server.contentBytes("GetBlobs") - before).toBeLessThanOrEqual(1001 + "hello\n".length);
  });

  test("many files in one call", async () => {
    const many = await storage.init("group/many-blobs.git");
    const files: Record<string, string> = {};
    for (let i = 0; i < 500; i++) files[`d/f${i}.yaml`] = `n: ${i}\n`;
    const commit = await many.commit(files);
    const read = await reader.readFiles(
      location("group/many-blobs.git"),
      commit,
      Object.keys(files),
      100,
      ctx,
    );
    expect(read.size).toBe(500);
    expect(read.get("d/f499.yaml")?.toString()).toBe("n: 499\n");
  });

  test("a missing repository is not_found", async () => {
    const err = await reader
      .readFiles(location("nope.git"), first, ["README.md"], 10, ctx)
      .catch((e: unknown) => e);
    expect((err as RepositoryError).code).toBe("not_found");
  });
});

describe("listFiles", () => {
  test("every blob from the root, recursively, with object ids", async () => {
    const files = await reader.listFiles(location("group/project.git"), first, "", ctx);
    expect(files.map((f) => f.path).sort()).toEqual([
      ".gitlab/agents/a1/config.yaml",
      "README.md",
      "big.bin",
      "empty.txt",
      "manifests/app/deploy.yaml",
      "manifests/app/svc.yaml",
      "manifests/ns.yaml",
    ]);
    const readme = files.find((f) => f.path === "README.md");
    expect(readme?.oid).toMatch(/^[0-9a-f]{40}$/);
  });

  test("a subdirectory: paths stay relative to the repository's root", async () => {
    const loc = location("group/project.git");
    const files = await reader.listFiles(loc, first, "manifests", ctx);
    expect(files.map((f) => f.path).sort()).toEqual([
      "manifests/app/deploy.yaml",
      "manifests/app/svc.yaml",
      "manifests/ns.yaml",
    ]);
    expect((await reader.listFiles(loc, first, "manifests/app/", ctx)).map((f) => f.path).sort()).toEqual([
      "manifests/app/deploy.yaml",
      "manifests/app/svc.yaml",
    ]);
  });

  test("a missing directory (or a file) is []", async () => {
    const loc = location("group/project.git");
    expect(await reader.listFiles(loc, first, "nope", ctx)).toEqual([]);
    expect(await reader.listFiles(loc, first, "README.md", ctx)).toEqual([]);
  });

  test("many files come over several messages", async () => {
    const many = await storage.init("group/many.git");
    const files: Record<string, string> = {};
    for (let i = 0; i < 120; i++) files[`d/f${String(i).padStart(3, "0")}.yaml`] = `n: ${i}\n`;
    const commit = await many.commit(files);
    const listed = await reader.listFiles(location("group/many.git"), commit, "d", ctx);
    expect(listed.map((f) => f.path).sort()).toEqual(Object.keys(files).sort());
    const limited = new GitalyRepositories({ maxTreeEntries: 100 });
    try {
      const err = await limited
        .listFiles(location("group/many.git"), commit, "", ctx)
        .catch((e: unknown) => e);
      expect((err as RepositoryError).code).toBe("too_large");
    } finally {
      await limited.close();
    }
  });
});
