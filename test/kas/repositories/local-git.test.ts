// The local-git backend against real repositories made by the test (bare and not).
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Registry } from "prom-client";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { LocalGitRepositories } from "../../../cmd/kas/repositories/local-git.ts";
import {
  RepositoryError,
  type RepositoryErrorCode,
  type RepositoryLocation,
  type RepositoryReader,
} from "../../../modules/runtime/repositories.ts";
import { GitRepo } from "../../support/git-repo.ts";

const ctx = { agentId: "1" };
const local = (path: string): RepositoryLocation => ({ backend: "local", path });

/** Asserts `promise` rejects with a RepositoryError of `code` whose message matches `message`. */
async function rejectsWith(promise: Promise<unknown>, code: RepositoryErrorCode, message?: RegExp | string) {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, "expected a rejection").toBeInstanceOf(Error);
  expect((err as Error).name).toBe("RepositoryError");
  expect({ code: (err as { code: string }).code, message: (err as Error).message }).toMatchObject({
    code,
    ...(message === undefined ? {} : { message: expect.stringMatching(message) }),
  });
}

describe.each([
  { bare: false, initialBranch: "main" },
  { bare: true, initialBranch: "trunk" },
])("local git repositories (bare: $bare)", ({ bare, initialBranch }) => {
  let repo: GitRepo;
  let reader: RepositoryReader;
  let loc: RepositoryLocation;
  let first: string;
  let second: string;
  let feature: string;

  beforeAll(async () => {
    repo = await GitRepo.init({ bare, initialBranch });
    loc = local(repo.path);
    reader = new LocalGitRepositories();
    first = await repo.commit({ "README.md": "v1" });
    second = await repo.commit({
      "README.md": "v2",
      ".gitlab/agents/a1/config.yaml": "gitops: {}\n",
      "manifests/app/deploy.yaml": "kind: Deployment\n",
      "manifests/app/svc.yaml": "kind: Service\n",
      "manifests/ns.yaml": "kind: Namespace\n",
      "bin.dat": Buffer.from([0, 1, 2, 255, 0]),
      "with space/and ünïcode.yaml": "x: 1\n",
    });
    feature = await repo.commit({ "README.md": "feature" }, { branch: "feature/x" });
  });
  afterAll(async () => {
    await reader.close();
    await repo.remove();
  });

  describe("resolveRef", () => {
    it("{} is the default branch (where HEAD points)", async () => {
      expect(await reader.resolveRef(loc, {}, ctx)).toBe(second);
    });

    it("{branch}: exact names only; a missing branch is undefined", async () => {
      expect(await reader.resolveRef(loc, { branch: initialBranch }, ctx)).toBe(second);
      expect(await reader.resolveRef(loc, { branch: "feature/x" }, ctx)).toBe(feature);
      // for-each-ref would match refs/heads/feature/x for "feature": not a branch of that name.
      expect(await reader.resolveRef(loc, { branch: "feature" }, ctx)).toBeUndefined();
      expect(await reader.resolveRef(loc, { branch: "nope" }, ctx)).toBeUndefined();
    });

    it("{tag}: lightweight, annotated and tag-of-tag all resolve to the commit", async () => {
      await repo.tag("light", first);
      const annotated = await repo.tag("v1.0", second, "release");
      expect(annotated).not.toBe(second);
      await repo.tag("v1.0-again", "v1.0", "a tag of a tag");
      expect(await reader.resolveRef(loc, { tag: "light" }, ctx)).toBe(first);
      expect(await reader.resolveRef(loc, { tag: "v1.0" }, ctx)).toBe(second);
      expect(await reader.resolveRef(loc, { tag: "v1.0-again" }, ctx)).toBe(second);
      expect(await reader.resolveRef(loc, { tag: "v9" }, ctx)).toBeUndefined();
      // A branch is not a tag and the other way round.
      expect(await reader.resolveRef(loc, { tag: initialBranch }, ctx)).toBeUndefined();
      expect(await reader.resolveRef(loc, { branch: "light" }, ctx)).toBeUndefined();
    });

    it("{tag} pointing at a tree is an error that says so", async () => {
      const tree = await repo.git(["rev-parse", `${second}^{tree}`]);
      await repo.tag("tree-tag", tree, "a tree");
      await rejectsWith(
        reader.resolveRef(loc, { tag: "tree-tag" }, ctx),
        "failed",
        /points at a tree, not a commit/,
      );
    });

    it("{commit}: a full id that exists (any case), else undefined; not a commit -> error", async () => {
      expect(await reader.resolveRef(loc, { commit: first }, ctx)).toBe(first);
      expect(await reader.resolveRef(loc, { commit: first.toUpperCase() }, ctx)).toBe(first);
      expect(await reader.resolveRef(loc, { commit: "0".repeat(40) }, ctx)).toBeUndefined();
      const tree = await repo.git(["rev-parse", `${second}^{tree}`]);
      await rejectsWith(reader.resolveRef(loc, { commit: tree }, ctx), "failed", /points at a tree/);
      await rejectsWith(reader.resolveRef(loc, { commit: first.slice(0, 12) }, ctx), "failed", /full hex/);
      await rejectsWith(reader.resolveRef(loc, { commit: "HEAD" }, ctx), "failed", /invalid commit id/);
    });

    it.each([
      ["--upload-pack=evil"],
      ["-x"],
      ["a..b"],
      ["../main"],
      ["main^{tree}"],
      ["main:README.md"],
      ["a b"],
      ["a\nb"],
      ["HEAD"],
      ["@"],
      ["x@{1}"],
      ["a/.hidden"],
      ["x.lock"],
      ["/abs"],
      ["trailing/"],
      ["star*"],
      [""],
    ])("refuses the branch/tag name %j with a clear error (never passed to git)", async (name) => {
      await rejectsWith(reader.resolveRef(loc, { branch: name }, ctx), "failed", /^invalid branch name/);
      await rejectsWith(reader.resolveRef(loc, { tag: name }, ctx), "failed", /^invalid tag name/);
    });
  });

  describe("readFile", () => {
    it("returns the content at that commit (binary-safe, any UTF-8 path)", async () => {
      expect((await reader.readFile(loc, first, "README.md", 100, ctx))?.toString()).toBe("v1");
      expect((await reader.readFile(loc, second, "README.md", 100, ctx))?.toString()).toBe("v2");
      expect(await reader.readFile(loc, second, ".gitlab/agents/a1/config.yaml", 100, ctx)).toEqual(
        Buffer.from("gitops: {}\n"),
      );
      expect(await reader.readFile(loc, second, "bin.dat", 5, ctx)).toEqual(Buffer.from([0, 1, 2, 255, 0]));
      expect((await reader.readFile(loc, second, "with space/and ünïcode.yaml", 100, ctx))?.toString()).toBe(
        "x: 1\n",
      );
    });

    it("undefined for a missing file, or a directory", async () => {
      expect(await reader.readFile(loc, first, ".gitlab/agents/a1/config.yaml", 100, ctx)).toBeUndefined();
      expect(await reader.readFile(loc, second, "manifests", 100, ctx)).toBeUndefined();
      expect(await reader.readFile(loc, second, "README.md/x", 100, ctx)).toBeUndefined();
    });

    it("a file of exactly maxBytes is read; one byte over is too_large", async () => {
      const size = 100_000;
      const big = await repo.commit(
        { "exact.bin": Buffer.alloc(size, 7), "over.bin": Buffer.alloc(size + 1, 7) },
        {
          branch: "big",
        },
      );
      expect((await reader.readFile(loc, big, "exact.bin", size, ctx))?.length).toBe(size);
      await rejectsWith(
        reader.readFile(loc, big, "over.bin", size, ctx),
        "too_large",
        /100001 bytes, over 100000/,
      );
      await rejectsWith(reader.readFile(loc, big, "exact.bin", size - 1, ctx), "too_large");
      expect(await reader.readFile(loc, second, "README.md", 2, ctx)).toEqual(Buffer.from("v2"));
      await rejectsWith(reader.readFile(loc, second, "README.md", 1, ctx), "too_large");
    });

    it("a commit that does not exist is an error, not a missing file", async () => {
      await rejectsWith(
        reader.readFile(loc, "1".repeat(40), "README.md", 100, ctx),
        "failed",
        /no commit 1{40}/,
      );
    });

    it.each([["../README.md"], ["./README.md"], ["/README.md"], ["a//b"], [""], ["a\nb"], ["a\0b"]])(
      "refuses the path %j",
      async (path) => {
        await rejectsWith(reader.readFile(loc, second, path, 100, ctx), "failed", /^invalid file path/);
      },
    );

    it("refuses a commit id that is not a full hex id", async () => {
      await rejectsWith(reader.readFile(loc, "--output=/tmp/x", "README.md", 100, ctx), "failed", /full hex/);
    });
  });

  describe("readFiles", () => {
    it("several files of a commit in one call (binary-safe, NUL and LF in content, empty files)", async () => {
      const tricky = Buffer.from("a\nb\0c\n\n1234567890abcdef0123456789abcdef01234567 blob 3\n");
      const many = await repo.commit(
        {
          "m/a.yaml": "kind: A\n",
          "m/tricky.bin": tricky,
          "m/empty.yaml": "",
          "m/same.yaml": "kind: A\n",
          "with space/ü.yaml": "x: 1",
        },
        { branch: "many" },
      );
      const files = await reader.readFiles(
        loc,
        many,
        ["m/a.yaml", "m/tricky.bin", "m/empty.yaml", "m/same.yaml", "with space/ü.yaml"],
        1000,
        ctx,
      );
      expect(Object.fromEntries([...files].map(([p, b]) => [p, b.toString("latin1")]))).toEqual({
        "m/a.yaml": "kind: A\n",
        "m/tricky.bin": tricky.toString("latin1"),
        "m/empty.yaml": "",
        "m/same.yaml": "kind: A\n",
        "with space/ü.yaml": "x: 1",
      });
    });

    it("missing files, directories and paths below a file are absent; the rest are read", async () => {
      const files = await reader.readFiles(
        loc,
        second,
        ["README.md", "nope.yaml", "manifests", "README.md/x", "manifests/ns.yaml"],
        100,
        ctx,
      );
      expect([...files.keys()].sort()).toEqual(["README.md", "manifests/ns.yaml"]);
      expect(files.get("manifests/ns.yaml")?.toString()).toBe("kind: Namespace\n");
      expect((await reader.readFiles(loc, first, ["manifests/ns.yaml"], 100, ctx)).size).toBe(0);
    });

    it("an empty list is an empty map", async () => {
      expect(await reader.readFiles(loc, second, [], 100, ctx)).toEqual(new Map());
    });

    it("files over maxTotalBytes together are too_large before any content is read", async () => {
      const two = await repo.commit(
        { "a.bin": Buffer.alloc(600, 1), "b.bin": Buffer.alloc(600, 2) },
        { branch: "total" },
      );
      expect((await reader.readFiles(loc, two, ["a.bin", "b.bin"], 1000, ctx, 1200)).size).toBe(2);
      const err = await reader
        .readFiles(loc, two, ["a.bin", "b.bin"], 1000, ctx, 1199)
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RepositoryError);
      expect(err).toMatchObject({ code: "too_large", path: undefined });
      expect((err as Error).message).toMatch(/2 files at [0-9a-f]{40} are 1200 bytes together, over 1199/);
    });

    it("one file over maxBytesEach is too_large, naming it; exactly maxBytesEach is read", async () => {
      const size = 100_000;
      const big = await repo.commit(
        { "exact.bin": Buffer.alloc(size, 7), "over.bin": Buffer.alloc(size + 1, 7) },
        { branch: "big-batch" },
      );
      const files = await reader.readFiles(loc, big, ["exact.bin", "README.md"], size, ctx);
      expect(files.get("exact.bin")?.length).toBe(size);
      const tooLarge = reader.readFiles(loc, big, ["README.md", "over.bin", "exact.bin"], size, ctx);
      await rejectsWith(tooLarge, "too_large", /^over\.bin at [0-9a-f]{40} is 100001 bytes, over 100000/);
      await expect(tooLarge).rejects.toMatchObject({ path: "over.bin" });
    });

    it("a missing commit is an error; bad paths and commit ids are refused", async () => {
      await rejectsWith(
        reader.readFiles(loc, "1".repeat(40), ["README.md"], 100, ctx),
        "failed",
        /no commit 1{40}/,
      );
      await rejectsWith(
        reader.readFiles(loc, second, ["README.md", "../x"], 100, ctx),
        "failed",
        /^invalid file path/,
      );
      await rejectsWith(reader.readFiles(loc, "HEAD", ["README.md"], 100, ctx), "failed", /full hex/);
      await rejectsWith(
        reader.readFiles(loc, second, ["README.md"], 100, { agentId: "1", signal: AbortSignal.abort() }),
        "aborted",
      );
    });

    it("thousands of files in one call", async () => {
      const files = Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`k/${i}.yaml`, `n: ${i}\n`]));
      const commit = await repo.commit(files, { branch: "thousands" });
      const read = await reader.readFiles(loc, commit, Object.keys(files), 100, ctx);
      expect(read.size).toBe(3000);
      expect(read.get("k/2999.yaml")?.toString()).toBe("n: 2999\n");
    });
  });

  describe("listFiles", () => {
    const blobId = (rev: string) => repo.git(["rev-parse", rev]);

    it("every blob under the root, recursively, with object ids", async () => {
      const files = await reader.listFiles(loc, second, "", ctx);
      expect(files.map((f) => f.path).sort()).toEqual([
        ".gitlab/agents/a1/config.yaml",
        "README.md",
        "bin.dat",
        "manifests/app/deploy.yaml",
        "manifests/app/svc.yaml",
        "manifests/ns.yaml",
        "with space/and ünïcode.yaml",
      ]);
      for (const f of files) expect(f.oid).toBe(await blobId(`${second}:${f.path}`));
    });

    it("a sub-directory: paths stay relative to the root (trailing slash allowed)", async () => {
      const want = ["manifests/app/deploy.yaml", "manifests/app/svc.yaml", "manifests/ns.yaml"];
      expect((await reader.listFiles(loc, second, "manifests", ctx)).map((f) => f.path).sort()).toEqual(want);
      expect((await reader.listFiles(loc, second, "manifests/", ctx)).map((f) => f.path).sort()).toEqual(
        want,
      );
      expect((await reader.listFiles(loc, second, "manifests/app", ctx)).map((f) => f.path).sort()).toEqual(
        want.slice(0, 2),
      );
    });

    it("[] for a missing directory, or a file", async () => {
      expect(await reader.listFiles(loc, first, "manifests", ctx)).toEqual([]);
      expect(await reader.listFiles(loc, second, "README.md", ctx)).toEqual([]);
    });

    it("a commit that does not exist is an error; bad paths are refused", async () => {
      await rejectsWith(reader.listFiles(loc, "2".repeat(40), "", ctx), "failed", /no commit/);
      await rejectsWith(reader.listFiles(loc, second, "../x", ctx), "failed", /^invalid dir path/);
    });

    it("a listing over maxListBytes is too_large", async () => {
      const small = new LocalGitRepositories({ maxListBytes: 200 });
      await rejectsWith(small.listFiles(loc, second, "", ctx), "too_large", /output over 200 bytes/);
      expect(await small.listFiles(loc, second, "manifests/app", ctx)).toHaveLength(2);
    });
  });
});

describe("local git: repository states and failures", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "local-git-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const reader = new LocalGitRepositories();

  it("an empty repository (unborn HEAD): every ref is undefined", async () => {
    for (const bare of [false, true]) {
      const repo = await GitRepo.init({ bare });
      try {
        expect(await reader.resolveRef(local(repo.path), {}, ctx)).toBeUndefined();
        expect(await reader.resolveRef(local(repo.path), { branch: "main" }, ctx)).toBeUndefined();
        expect(await reader.resolveRef(local(repo.path), { tag: "v1" }, ctx)).toBeUndefined();
      } finally {
        await repo.remove();
      }
    }
  });

  it("HEAD on a branch with no commits while others exist: undefined; detached HEAD: its commit", async () => {
    const repo = await GitRepo.init({ bare: true });
    try {
      const c = await repo.commit({ a: "1" }, { branch: "other" });
      expect(await reader.resolveRef(local(repo.path), {}, ctx)).toBeUndefined();
      await repo.git(["update-ref", "--no-deref", "HEAD", c]);
      expect(await reader.resolveRef(local(repo.path), {}, ctx)).toBe(c);
    } finally {
      await repo.remove();
    }
  });

  it("a path that is not a repository is not_found, naming the path (no discovery of a parent repository)", async () => {
    const plain = join(dir, "plain");
    await mkdir(plain);
    await rejectsWith(
      reader.resolveRef(local(plain), {}, ctx),
      "not_found",
      `not a git repository: ${plain}`,
    );
    const missing = join(dir, "missing");
    await rejectsWith(reader.resolveRef(local(missing), {}, ctx), "not_found", missing);
    // A directory inside a work tree is not that repository.
    const repo = await GitRepo.init();
    try {
      await repo.commit({ a: "1" });
      const sub = join(repo.path, "sub");
      await mkdir(sub);
      await rejectsWith(reader.resolveRef(local(sub), {}, ctx), "not_found", sub);
    } finally {
      await repo.remove();
    }
  });

  it("a Gitaly location is refused", async () => {
    const gitaly: RepositoryLocation = {
      backend: "gitaly",
      gitaly: { address: "tcp://x:1", features: {} },
      repository: { storageName: "s", relativePath: "r", glRepository: "g", glProjectPath: "p" },
    };
    await rejectsWith(reader.resolveRef(gitaly, {}, ctx), "failed", /cannot read a gitaly location/);
  });

  it("git missing is failed", async () => {
    const noGit = new LocalGitRepositories({ gitBinary: join(dir, "no-such-git") });
    await rejectsWith(noGit.resolveRef(local(dir), {}, ctx), "failed", /git executable not found/);
  });

  describe("with a slow git (a wrapper that logs, sleeps, then runs git)", () => {
    let repo: GitRepo;
    let slowGit: string;
    let log: string;
    beforeAll(async () => {
      repo = await GitRepo.init();
      await repo.commit({ a: "1" });
      log = join(dir, "calls.log");
      slowGit = join(dir, "slow-git");
      await writeFile(
        slowGit,
        `#!/bin/sh\necho + >> "${log}"\nsleep "\${SLOW_GIT_SECONDS:-0.2}"\necho - >> "${log}"\nexec git "$@"\n`,
      );
      await chmod(slowGit, 0o755);
    });
    afterAll(async () => {
      await repo.remove();
    });

    it("at most `concurrency` git processes run at once; every call completes", async () => {
      await writeFile(log, "");
      const limited = new LocalGitRepositories({ gitBinary: slowGit, concurrency: 2 });
      const results = await Promise.all(
        Array.from({ length: 6 }, () => limited.resolveRef(local(repo.path), { branch: "main" }, ctx)),
      );
      expect(new Set(results).size).toBe(1);
      let depth = 0;
      let max = 0;
      for (const mark of (await readFile(log, "utf8")).split("\n").filter(Boolean)) {
        depth += mark === "+" ? 1 : -1;
        max = Math.max(max, depth);
      }
      expect(max).toBe(2);
    });

    it("an already-aborted signal, an abort mid-call, or an abort while queued: aborted", async () => {
      const limited = new LocalGitRepositories({ gitBinary: slowGit, concurrency: 1 });
      await rejectsWith(
        limited.resolveRef(local(repo.path), {}, { agentId: "1", signal: AbortSignal.abort() }),
        "aborted",
      );
      // Commit lookups go to git at once: a ref lookup first reads its files (ref-cache.ts), so
      // concurrent ones can reach the git slot in any order.
      const commit = { commit: await repo.git(["rev-parse", "main"]) };
      const ac = new AbortController();
      const running = limited.resolveRef(local(repo.path), commit, { agentId: "1", signal: ac.signal });
      const queued = limited.resolveRef(local(repo.path), commit, { agentId: "1", signal: ac.signal });
      const unrelated = limited.resolveRef(local(repo.path), commit, ctx);
      setTimeout(() => ac.abort(), 50);
      await rejectsWith(running, "aborted", /abandoned/);
      await rejectsWith(queued, "aborted", /waiting for a git process slot/);
      // The queue moves on for other callers.
      expect(await unrelated).toMatch(/^[0-9a-f]{40}$/);
    });

    it("readFiles: an abort mid-call is aborted", async () => {
      const limited = new LocalGitRepositories({ gitBinary: slowGit, concurrency: 1 });
      const commit = await limited.resolveRef(local(repo.path), { branch: "main" }, ctx);
      const ac = new AbortController();
      const running = limited.readFiles(local(repo.path), commit!, ["a.yaml"], 100, {
        agentId: "1",
        signal: ac.signal,
      });
      setTimeout(() => ac.abort(), 50);
      await rejectsWith(running, "aborted", /abandoned/);
    });

    it("a git process over the timeout is killed: aborted", async () => {
      const hung = join(dir, "hung-git");
      await writeFile(hung, "#!/bin/sh\nexec sleep 30\n");
      await chmod(hung, 0o755);
      const impatient = new LocalGitRepositories({ gitBinary: hung, timeoutMs: 100 });
      await rejectsWith(impatient.resolveRef(local(repo.path), {}, ctx), "aborted", /timed out after 100 ms/);
    });
  });
});

describe("local git: ref answers kept while git's ref files are unchanged", () => {
  let dir: string;
  let gitBinary: string;
  let log: string;
  let hook: string;
  // An hour ahead: the repositories' files, just written, look settled (a file changed within
  // seconds is not trusted); tests move it on to expire answers.
  let now: number;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "local-git-refs-"));
    log = join(dir, "spawns.log");
    hook = join(dir, "after-git.sh");
    gitBinary = join(dir, "counting-git");
    // Logs every spawn (its command: after "-C <repo>"); runs the hook script (once) after git, while kas has not yet had the answer.
    await writeFile(
      gitBinary,
      `#!/bin/sh\necho "$3" >> "${log}"\ngit "$@"\nrc=$?\nif [ -f "${hook}" ]; then sh "${hook}"; rm -f "${hook}"; fi\nexit $rc\n`,
    );
    await chmod(gitBinary, 0o755);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  beforeEach(async () => {
    now = Date.now() + 3_600_000;
    await writeFile(log, "");
  });

  const reader = (refCache: { maxEntries?: number; maxAgeMs?: number } = {}, registry?: Registry) =>
    new LocalGitRepositories({
      gitBinary,
      refCache: { now: () => now, ...refCache },
      ...(registry && { registry }),
    });
  /** The git commands run since the last call (first argument of each). */
  const spawned = async (): Promise<string[]> => {
    const lines = (await readFile(log, "utf8")).split("\n").filter(Boolean);
    await writeFile(log, "");
    return lines;
  };

  describe.each([{ bare: true }, { bare: false }])("bare: $bare", ({ bare }) => {
    let repo: GitRepo;
    let loc: RepositoryLocation;
    let c1: string;
    let c2: string;
    beforeEach(async () => {
      repo = await GitRepo.init({ bare });
      loc = local(repo.path);
      c1 = await repo.commit({ a: "1" });
      c2 = await repo.commit({ a: "2" }, { branch: "other" });
    });
    afterEach(async () => {
      await repo.remove();
    });

    it("a second poll of an unchanged branch, tag or default branch runs no git; the default branch takes one process", async () => {
      const r = reader();
      await repo.tag("v1", c1, "annotated");
      await spawned();
      expect(await r.resolveRef(loc, {}, ctx)).toBe(c1);
      expect(await spawned()).toEqual(["for-each-ref"]);
      expect(await r.resolveRef(loc, { branch: "other" }, ctx)).toBe(c2);
      expect(await r.resolveRef(loc, { tag: "v1" }, ctx)).toBe(c1);
      expect(await r.resolveRef(loc, { branch: "nope" }, ctx)).toBeUndefined();
      expect(await spawned()).toHaveLength(3);
      for (let i = 0; i < 3; i++) {
        expect(await r.resolveRef(loc, {}, ctx)).toBe(c1);
        expect(await r.resolveRef(loc, { branch: "other" }, ctx)).toBe(c2);
        expect(await r.resolveRef(loc, { tag: "v1" }, ctx)).toBe(c1);
        expect(await r.resolveRef(loc, { branch: "nope" }, ctx)).toBeUndefined();
      }
      expect(await spawned()).toEqual([]);
      // A commit id is no ref: looked up every time.
      expect(await r.resolveRef(loc, { commit: c2 }, ctx)).toBe(c2);
      expect(await spawned()).toEqual(["cat-file"]);
      // A kept answer still honours an aborted signal.
      await rejectsWith(r.resolveRef(loc, {}, { agentId: "1", signal: AbortSignal.abort() }), "aborted");
    });

    it("a ref moved by update-ref right after a poll is seen (a new file: a new inode)", async () => {
      const r = reader();
      for (const [selector, refname] of [
        [{}, `refs/heads/${repo.initialBranch}`],
        [{ branch: "other" }, "refs/heads/other"],
      ] as const) {
        const before = await r.resolveRef(loc, selector, ctx);
        expect(await r.resolveRef(loc, selector, ctx)).toBe(before);
        await spawned();
        const after = before === c1 ? c2 : c1;
        await repo.git(["update-ref", refname, after]);
        expect(await r.resolveRef(loc, selector, ctx)).toBe(after);
        expect(await spawned()).toHaveLength(1);
      }
    });

    it("a ref moved while git reads it (after the signature) is seen at the next poll", async () => {
      const r = reader();
      for (const [selector, refname] of [
        [{ branch: "other" }, "refs/heads/other"],
        [{}, `refs/heads/${repo.initialBranch}`],
      ] as const) {
        const before = await repo.git(["rev-parse", refname]);
        const after = before === c1 ? c2 : c1;
        await writeFile(hook, `git -C "${repo.path}" update-ref ${refname} ${after}\n`);
        // The answer of the git run, before the move.
        expect(await r.resolveRef(loc, selector, ctx)).toBe(before);
        expect(await r.resolveRef(loc, selector, ctx)).toBe(after);
        expect(await r.resolveRef(loc, selector, ctx)).toBe(after);
        expect(await spawned()).toHaveLength(2);
      }
    });

    it("pack-refs, then a move; a packed ref deleted; a loose ref deleted", async () => {
      const r = reader();
      expect(await r.resolveRef(loc, { branch: "other" }, ctx)).toBe(c2);
      await repo.git(["pack-refs", "--all"]);
      expect(await r.resolveRef(loc, { branch: "other" }, ctx)).toBe(c2);
      await spawned();
      expect(await r.resolveRef(loc, { branch: "other" }, ctx)).toBe(c2);
      expect(await spawned()).toEqual([]);
      // Only in packed-refs: deleting it rewrites packed-refs alone.
      await repo.git(["update-ref", "-d", "refs/heads/other"]);
      expect(await r.resolveRef(loc, { branch: "other" }, ctx)).toBeUndefined();
      // Packed, then moved (a loose file again).
      await repo.git(["update-ref", "refs/heads/other", c2]);
      await repo.git(["pack-refs", "--all"]);
      expect(await r.resolveRef(loc, { branch: "other" }, ctx)).toBe(c2);
      expect(await r.resolveRef(loc, {}, ctx)).toBe(c1);
      await spawned();
      await repo.git(["update-ref", "refs/heads/other", c1]);
      await repo.git(["update-ref", `refs/heads/${repo.initialBranch}`, c2]);
      expect(await r.resolveRef(loc, { branch: "other" }, ctx)).toBe(c1);
      expect(await r.resolveRef(loc, {}, ctx)).toBe(c2);
      expect(await spawned()).toHaveLength(2);
      // A loose ref deleted (packed-refs no longer has it either).
      expect(await r.resolveRef(loc, { branch: "other" }, ctx)).toBe(c1);
      await repo.git(["update-ref", "-d", "refs/heads/other"]);
      expect(await r.resolveRef(loc, { branch: "other" }, ctx)).toBeUndefined();
    });

    it("HEAD re-pointed to another branch, or detached, is seen", async () => {
      const r = reader();
      expect(await r.resolveRef(loc, {}, ctx)).toBe(c1);
      expect(await r.resolveRef(loc, {}, ctx)).toBe(c1);
      await repo.git(["symbolic-ref", "HEAD", "refs/heads/other"]);
      expect(await r.resolveRef(loc, {}, ctx)).toBe(c2);
      await repo.git(["update-ref", "--no-deref", "HEAD", c1]);
      await spawned();
      expect(await r.resolveRef(loc, {}, ctx)).toBe(c1);
      expect(await r.resolveRef(loc, {}, ctx)).toBe(c1);
      // Detached: one process, and kept.
      expect(await spawned()).toEqual(["cat-file"]);
      await repo.git(["update-ref", "--no-deref", "HEAD", c2]);
      expect(await r.resolveRef(loc, {}, ctx)).toBe(c2);
      await repo.git(["symbolic-ref", "HEAD", `refs/heads/${repo.initialBranch}`]);
      expect(await r.resolveRef(loc, {}, ctx)).toBe(c1);
    });

    it("a symbolic branch ref is not kept: moving its target is seen", async () => {
      const r = reader();
      await repo.git(["symbolic-ref", "refs/heads/alias", "refs/heads/other"]);
      expect(await r.resolveRef(loc, { branch: "alias" }, ctx)).toBe(c2);
      await repo.git(["update-ref", "refs/heads/other", c1]);
      expect(await r.resolveRef(loc, { branch: "alias" }, ctx)).toBe(c1);
      // HEAD -> alias -> other: symbolic-ref and for-each-ref on every poll, as before.
      await repo.git(["symbolic-ref", "HEAD", "refs/heads/alias"]);
      await spawned();
      expect(await r.resolveRef(loc, {}, ctx)).toBe(c1);
      await repo.git(["update-ref", "refs/heads/other", c2]);
      expect(await r.resolveRef(loc, {}, ctx)).toBe(c2);
      expect(await spawned()).toEqual(["symbolic-ref", "for-each-ref", "symbolic-ref", "for-each-ref"]);
    });
  });

  it("a linked worktree (`.git` a file) is not kept: its refs live in the main repository", async () => {
    const repo = await GitRepo.init();
    try {
      const c1 = await repo.commit({ a: "1" });
      const c2 = await repo.commit({ a: "2" });
      const wt = join(repo.dir, "wt");
      await repo.git(["worktree", "add", "-q", "-b", "wt", wt, c1]);
      const r = reader();
      await spawned();
      expect(await r.resolveRef(local(wt), {}, ctx)).toBe(c1);
      expect(await r.resolveRef(local(wt), { branch: "wt" }, ctx)).toBe(c1);
      await repo.git(["update-ref", "refs/heads/wt", c2]);
      expect(await r.resolveRef(local(wt), {}, ctx)).toBe(c2);
      expect(await r.resolveRef(local(wt), { branch: "wt" }, ctx)).toBe(c2);
      expect(await spawned()).toEqual([
        "symbolic-ref",
        "for-each-ref",
        "for-each-ref",
        "symbolic-ref",
        "for-each-ref",
        "for-each-ref",
      ]);
    } finally {
      await repo.remove();
    }
  });

  describe("bounds", () => {
    let repo: GitRepo;
    let loc: RepositoryLocation;
    beforeAll(async () => {
      repo = await GitRepo.init({ bare: true });
      loc = local(repo.path);
      const c = await repo.commit({ a: "1" });
      for (const b of ["a", "b", "c"]) await repo.branch(b, c);
    });
    afterAll(async () => {
      await repo.remove();
    });

    it("answers past maxEntries are dropped, least recently used first", async () => {
      const r = reader({ maxEntries: 2 });
      const poll = async (branch: string) => {
        await r.resolveRef(loc, { branch }, ctx);
        return (await spawned()).length;
      };
      expect([await poll("a"), await poll("b"), await poll("a"), await poll("b")]).toEqual([1, 1, 0, 0]);
      // a is the least recently used: c takes its place.
      expect([await poll("a"), await poll("c"), await poll("a"), await poll("b")]).toEqual([0, 1, 0, 1]);
      expect([await poll("a"), await poll("b"), await poll("c")]).toEqual([0, 0, 1]);
    });

    it("an answer older than maxAgeMs (or kept at a later clock time) is looked up again, files unchanged or not", async () => {
      const r = reader({ maxAgeMs: 60_000 });
      await r.resolveRef(loc, { branch: "a" }, ctx);
      await r.resolveRef(loc, {}, ctx);
      now += 59_999;
      await r.resolveRef(loc, { branch: "a" }, ctx);
      await r.resolveRef(loc, {}, ctx);
      expect(await spawned()).toHaveLength(2);
      now += 1;
      await r.resolveRef(loc, { branch: "a" }, ctx);
      await r.resolveRef(loc, {}, ctx);
      await r.resolveRef(loc, { branch: "a" }, ctx);
      await r.resolveRef(loc, {}, ctx);
      expect(await spawned()).toHaveLength(2);
      // A clock set back: the answers' age is unknown.
      now -= 1;
      await r.resolveRef(loc, { branch: "a" }, ctx);
      await r.resolveRef(loc, {}, ctx);
      expect(await spawned()).toHaveLength(2);
    });

    it("a ref file changed within seconds is not trusted (coarse timestamps): looked up until it settles", async () => {
      const r = reader();
      now = Date.now();
      await repo.branch("fresh", await repo.git(["rev-parse", "a"]));
      await r.resolveRef(loc, { branch: "fresh" }, ctx);
      await r.resolveRef(loc, { branch: "fresh" }, ctx);
      expect(await spawned()).toHaveLength(2);
      now += 10_000;
      await r.resolveRef(loc, { branch: "fresh" }, ctx);
      await r.resolveRef(loc, { branch: "fresh" }, ctx);
      expect(await spawned()).toHaveLength(1);
    });

    it("a detached HEAD naming a missing commit is not kept (the object may arrive)", async () => {
      const bare = await GitRepo.init({ bare: true });
      try {
        await writeFile(join(bare.path, "HEAD"), `${"1".repeat(40)}\n`);
        const r = reader();
        expect(await r.resolveRef(local(bare.path), {}, ctx)).toBeUndefined();
        expect(await r.resolveRef(local(bare.path), {}, ctx)).toBeUndefined();
        expect(await spawned()).toEqual(["cat-file", "cat-file"]);
      } finally {
        await bare.remove();
      }
    });

    it("kas_repository_local_ref_lookups_total counts hits, misses and uncached lookups", async () => {
      const registry = new Registry();
      const r = reader({}, registry);
      await r.resolveRef(loc, { branch: "b" }, ctx);
      await r.resolveRef(loc, { branch: "b" }, ctx);
      await r.resolveRef(loc, { branch: "b" }, ctx);
      await repo.git(["symbolic-ref", "refs/heads/sym", "refs/heads/a"]);
      await r.resolveRef(loc, { branch: "sym" }, ctx);
      const values = (await registry.getSingleMetric("kas_repository_local_ref_lookups_total")?.get())
        ?.values;
      expect(Object.fromEntries(values!.map((v) => [v.labels.result, v.value]))).toEqual({
        miss: 1,
        hit: 2,
        uncached: 1,
      });
    });
  });
});
