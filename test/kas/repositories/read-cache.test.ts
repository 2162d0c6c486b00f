// The read cache in front of the Gitaly test server (real git repositories): reads at a commit
// reach Gitaly once however many callers make them, at once or in turn; errors always go back to
// Gitaly; the byte bound evicts; one caller giving up does not cancel the read for the others.
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { GitalyRepositories } from "../../../cmd/kas/repositories/gitaly/index.ts";
import { createRepositories, type GitalyKasConfig } from "../../../cmd/kas/repositories/index.ts";
import { CachedRepositories } from "../../../cmd/kas/repositories/read-cache.ts";
import type { RepositoryLocation } from "../../../modules/runtime/repositories.ts";
import { type TestRepo, TestStorage } from "../../support/git-repo.ts";
import { type GitalyMethod, GitalyTestServer } from "../../support/gitaly-server.ts";
import { silentLogger } from "../support/fixtures.ts";

const TOKEN = "gitaly-secret-token";
const ctx = { agentId: "1" };
const MAX = 1024;
const CONFIG = ".gitlab/agents/a1/config.yaml";

let storage: TestStorage;
let server: GitalyTestServer;
let backend: GitalyRepositories;
let repo: TestRepo;
let first: string;
let second: string;

function location(token = TOKEN): RepositoryLocation {
  return {
    backend: "gitaly",
    gitaly: { address: server.address, token, features: {} },
    repository: {
      storageName: "default",
      relativePath: "group/project.git",
      glRepository: "project-1",
      glProjectPath: "group/project",
    },
  };
}

function cached(maxBytes?: number) {
  const registry = new Registry();
  return {
    reader: new CachedRepositories(backend, { registry, ...(maxBytes !== undefined && { maxBytes }) }),
    registry,
  };
}

/** Calls of `method` that reach Gitaly while `body` runs. */
async function callsDuring(method: GitalyMethod, body: () => Promise<unknown>): Promise<number> {
  const before = server.calls(method);
  await body();
  return server.calls(method) - before;
}

beforeAll(async () => {
  storage = await TestStorage.create();
  repo = await storage.init("group/project.git", "main");
  first = await repo.commit({
    [CONFIG]: "gitops: {}\n",
    "manifests/a.yaml": "kind: A\n",
    "manifests/b.yaml": "kind: B\n",
    "big-1.txt": "1".repeat(400),
    "big-2.txt": "2".repeat(400),
  });
  second = await repo.commit({ [CONFIG]: "gitops: {changed: true}\n" });
  server = await GitalyTestServer.start({ storages: { default: storage.root }, token: TOKEN });
  backend = new GitalyRepositories();
});

afterAll(async () => {
  await backend?.close();
  await server?.close();
  await storage?.remove();
});

describe("one Gitaly call per distinct read at a commit", () => {
  test("concurrent then sequential reads of one file share one TreeEntry", async () => {
    const { reader, registry } = cached();
    const calls = await callsDuring("TreeEntry", async () => {
      const all = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          reader.readFile(location(), first, CONFIG, MAX, { agentId: String(i) }),
        ),
      );
      for (const content of all) expect(content?.toString()).toBe("gitops: {}\n");
      for (let i = 0; i < 5; i++) {
        expect((await reader.readFile(location(), first, CONFIG, MAX, ctx))?.toString()).toBe("gitops: {}\n");
      }
    });
    expect(calls).toBe(1);
    const counts = (await registry.getSingleMetric("kas_repository_read_cache_total")?.get())?.values;
    const by = (result: string) => counts?.find((v) => v.labels.result === result)?.value;
    expect([by("miss"), by("shared"), by("hit")]).toEqual([1, 19, 5]);
  });

  test("a missing file is kept too: undefined, once", async () => {
    const { reader } = cached();
    const calls = await callsDuring("TreeEntry", async () => {
      expect(await reader.readFile(location(), first, "nope.yaml", MAX, ctx)).toBeUndefined();
      expect(await reader.readFile(location(), first, "nope.yaml", MAX, ctx)).toBeUndefined();
    });
    expect(calls).toBe(1);
  });

  test("different commits are different reads", async () => {
    const { reader } = cached();
    const calls = await callsDuring("TreeEntry", async () => {
      expect((await reader.readFile(location(), first, CONFIG, MAX, ctx))?.toString()).toBe("gitops: {}\n");
      expect((await reader.readFile(location(), second, CONFIG, MAX, ctx))?.toString()).toBe(
        "gitops: {changed: true}\n",
      );
      await reader.readFile(location(), first, CONFIG, MAX, ctx);
      await reader.readFile(location(), second, CONFIG, MAX, ctx);
    });
    expect(calls).toBe(2);
  });

  test("listFiles and readFiles (as GitOps reads manifests) reach Gitaly once each", async () => {
    const { reader } = cached();
    const paths = ["manifests/a.yaml", "manifests/b.yaml"];
    const list = await callsDuring("GetTreeEntries", async () => {
      for (let i = 0; i < 3; i++) {
        const files = await reader.listFiles(location(), first, "manifests", ctx);
        expect(files.map((f) => f.path).sort()).toEqual(paths);
      }
    });
    const blobs = await callsDuring("GetBlobs", async () => {
      for (let i = 0; i < 3; i++) {
        const files = await reader.readFiles(
          location(),
          first,
          i === 1 ? [...paths].reverse() : paths,
          MAX,
          ctx,
        );
        expect(files.get("manifests/b.yaml")?.toString()).toBe("kind: B\n");
        // Each caller gets its own map: what one does to it does not reach the next.
        files.clear();
      }
    });
    expect([list, blobs]).toEqual([1, 1]);
  });
});

test("the byte bound evicts the least recently used read", async () => {
  // Room for one 400-byte file (with its bookkeeping), not two.
  const { reader } = cached(700);
  const calls = await callsDuring("TreeEntry", async () => {
    await reader.readFile(location(), first, "big-1.txt", MAX, ctx);
    await reader.readFile(location(), first, "big-1.txt", MAX, ctx);
    await reader.readFile(location(), first, "big-2.txt", MAX, ctx);
    expect((await reader.readFile(location(), first, "big-1.txt", MAX, ctx))?.toString()).toBe(
      "1".repeat(400),
    );
  });
  expect(calls).toBe(3);
  expect(reader.bytes).toBeLessThanOrEqual(700);
});

test("errors are not kept: the next call asks Gitaly again", async () => {
  const { reader } = cached();
  // The token is no part of what a read is kept under: a refusal kept would answer the good call.
  const calls = await callsDuring("TreeEntry", async () => {
    await expect(reader.readFile(location("wrong-token"), first, CONFIG, MAX, ctx)).rejects.toMatchObject({
      code: "permission_denied",
    });
    for (let i = 0; i < 2; i++) {
      expect((await reader.readFile(location(), first, CONFIG, MAX, ctx))?.toString()).toBe("gitops: {}\n");
    }
  });
  expect(calls).toBe(2);
});

test("kas's reader: a kept read takes no rate-limit token", async () => {
  // One token for this Gitaly server, the next in ~17 minutes: a second call to Gitaly would wait.
  const plenty = { refillRatePerSecond: 100, bucketSize: 100 };
  const gitaly: GitalyKasConfig = {
    globalApiRateLimit: plenty,
    perServerApiRateLimit: { refillRatePerSecond: 0.001, bucketSize: 1 },
    perAgentApiRateLimit: plenty,
    clusterApiRateLimit: plenty,
  };
  const reader = createRepositories({ gitaly, registry: new Registry(), log: silentLogger() });
  for (let i = 0; i < 3; i++) {
    const read = reader.readFile(location(), second, CONFIG, MAX, {
      agentId: "1",
      signal: AbortSignal.timeout(2_000),
    });
    expect((await read)?.toString()).toBe("gitops: {changed: true}\n");
  }
  await reader.close();
});

test("a caller that gives up does not cancel the shared read for the others", async () => {
  const { reader } = cached();
  const release = server.hold("TreeEntry");
  const before = server.calls("TreeEntry");
  const quitter = new AbortController();
  const abandoned = reader.readFile(location(), first, CONFIG, MAX, { agentId: "1", signal: quitter.signal });
  const staying = reader.readFile(location(), first, CONFIG, MAX, {
    agentId: "2",
    signal: new AbortController().signal,
  });
  quitter.abort(new Error("agent went away"));
  await expect(abandoned).rejects.toMatchObject({ code: "aborted" });
  release();
  expect((await staying)?.toString()).toBe("gitops: {}\n");
  expect(server.calls("TreeEntry") - before).toBe(1);
  // And what it read is kept.
  expect((await reader.readFile(location(), first, CONFIG, MAX, ctx))?.toString()).toBe("gitops: {}\n");
  expect(server.calls("TreeEntry") - before).toBe(1);
});

test("when every caller gives up, a later caller starts a fresh read", async () => {
  const { reader } = cached();
  const release = server.hold("TreeEntry");
  const before = server.calls("TreeEntry");
  const quitter = new AbortController();
  const abandoned = reader.readFile(location(), first, "manifests/a.yaml", MAX, {
    agentId: "1",
    signal: quitter.signal,
  });
  quitter.abort(new Error("gone"));
  await expect(abandoned).rejects.toMatchObject({ code: "aborted" });
  release();
  expect((await reader.readFile(location(), first, "manifests/a.yaml", MAX, ctx))?.toString()).toBe(
    "kind: A\n",
  );
  expect(server.calls("TreeEntry") - before).toBe(2);
});
