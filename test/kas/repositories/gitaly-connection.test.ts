// How GitalyRepositories talks to Gitaly: addresses (tcp, tls, unix), the v2 token, feature
// flags, deadlines, aborts, connection reuse and idle closing, and how failures are reported.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  GitalyAddressError,
  GitalyRepositories,
  type GitalyRepositoriesOptions,
  parseGitalyAddress,
} from "../../../cmd/kas/repositories/gitaly/index.ts";
import type { GitalyInfo } from "../../../modules/runtime/index.ts";
import { RepositoryError, type RepositoryLocation } from "../../../modules/runtime/repositories.ts";
import { TestStorage } from "../../support/git-repo.ts";
import { GitalyTestServer, type GitalyTestServerOptions } from "../../support/gitaly-server.ts";
import { closedPort } from "../../support/ports.ts";
import { testPki } from "../../support/tls-certs.ts";
import { until } from "../../support/until.ts";

const TOKEN = "s3cr3t-gitaly-token-value";
const ctx = { agentId: "7" };

let storage: TestStorage;
let head: string;
let socketDir: string;
const servers: GitalyTestServer[] = [];
const readers: GitalyRepositories[] = [];

async function startServer(options: Partial<GitalyTestServerOptions> = {}): Promise<GitalyTestServer> {
  const server = await GitalyTestServer.start({
    storages: { default: storage.root },
    token: TOKEN,
    ...options,
  });
  servers.push(server);
  return server;
}

function newReader(options: GitalyRepositoriesOptions = {}): GitalyRepositories {
  const reader = new GitalyRepositories(options);
  readers.push(reader);
  return reader;
}

function location(
  address: string,
  gitaly: Partial<GitalyInfo> = {},
  relativePath = "p.git",
): RepositoryLocation {
  return {
    backend: "gitaly",
    gitaly: { address, token: TOKEN, features: {}, ...gitaly },
    repository: {
      storageName: "default",
      relativePath,
      glRepository: "project-9",
      glProjectPath: "team/app",
    },
  };
}

async function failure(promise: Promise<unknown>): Promise<RepositoryError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(RepositoryError);
  return err as RepositoryError;
}

beforeAll(async () => {
  storage = await TestStorage.create();
  const repo = await storage.init("p.git");
  head = await repo.commit({ "config.yaml": "a: 1\n", "big.bin": Buffer.alloc(200_000, "y") });
  socketDir = await mkdtemp(join(tmpdir(), "gitaly-sock-"));
});

afterAll(async () => {
  for (const reader of readers) await reader.close();
  for (const server of servers) await server.close();
  await storage?.remove();
  if (socketDir) await rm(socketDir, { recursive: true, force: true });
});

describe("addresses", () => {
  test.each([
    ["tcp://127.0.0.1:2305", { target: "127.0.0.1:2305", tls: false }],
    ["tcp://gitaly.internal:8075", { target: "gitaly.internal:8075", tls: false }],
    ["tls://gitaly.internal:9999", { target: "gitaly.internal:9999", tls: true }],
    ["tcp://[::1]:2305", { target: "[::1]:2305", tls: false }],
    [
      "unix:/var/opt/gitlab/gitaly/gitaly.socket",
      { target: "unix:/var/opt/gitlab/gitaly/gitaly.socket", tls: false },
    ],
    [
      "unix:///var/opt/gitlab/gitaly/gitaly.socket",
      { target: "unix:/var/opt/gitlab/gitaly/gitaly.socket", tls: false },
    ],
  ])("%s", (address, expected) => {
    expect(parseGitalyAddress(address)).toEqual(expected);
  });

  test.each([["http://x:1"], ["tcp://x"], ["gitaly:8075"], ["unix:"]])("%s is refused", (address) => {
    expect(() => parseGitalyAddress(address)).toThrow(GitalyAddressError);
  });

  test("an unsupported address is a failed RepositoryError naming it", async () => {
    const err = await failure(newReader().resolveRef(location("http://x:1"), {}, ctx));
    expect(err.code).toBe("failed");
    expect(err.message).toContain("http://x:1");
  });

  test("tcp://", async () => {
    const server = await startServer();
    expect(server.address).toMatch(/^tcp:\/\//);
    expect(await newReader().resolveRef(location(server.address), {}, ctx)).toBe(head);
  });

  test("unix:/path and unix:///path", async () => {
    const path = join(socketDir, "gitaly.socket");
    const server = await startServer({ listen: { unix: path } });
    const reader = newReader();
    expect(await reader.resolveRef(location(`unix:${path}`), {}, ctx)).toBe(head);
    expect(await reader.resolveRef(location(`unix://${path}`), {}, ctx)).toBe(head);
    expect(server.calls("InfoRefsUploadPack")).toBe(2);
  });

  test("tls:// with an extra CA; without it the server's certificate is not trusted", async () => {
    const pki = await testPki();
    const server = await startServer({ tls: { key: pki.key, cert: pki.cert } });
    expect(server.address).toMatch(/^tls:\/\/localhost:/);
    const trusted = newReader({ extraCa: pki.caCert });
    expect(await trusted.resolveRef(location(server.address), {}, ctx)).toBe(head);
    const err = await failure(
      newReader({ callTimeoutMs: 5000 }).resolveRef(location(server.address), {}, ctx),
    );
    expect(err.code).toBe("unavailable");
  });
});

describe("authentication", () => {
  let server: GitalyTestServer;
  beforeAll(async () => {
    server = await startServer();
  });

  test("the v2 token: Bearer v2.<hmac>.<unix seconds>, never the token itself", async () => {
    await newReader().resolveRef(location(server.address), {}, ctx);
    const auth = server.seen.at(-1)?.metadata.authorization;
    expect(auth).toMatch(/^Bearer v2\.[0-9a-f]{64}\.\d+$/);
    expect(Math.abs(Number(auth!.split(".")[2]) - Date.now() / 1000)).toBeLessThan(5);
    expect(JSON.stringify(server.seen)).not.toContain(TOKEN);
  });

  test("a wrong token is permission_denied, and the token appears nowhere in the error", async () => {
    const wrong = "wrong-token-that-must-not-leak";
    const reader = newReader();
    for (const call of [
      reader.resolveRef(location(server.address, { token: wrong }), {}, ctx),
      reader.readFile(location(server.address, { token: wrong }), head, "config.yaml", 100, ctx),
      reader.listFiles(location(server.address, { token: wrong }), head, "", ctx),
      reader.resolveRef(location(server.address, { token: wrong }), { commit: head }, ctx),
    ]) {
      const err = await failure(call);
      expect(err.code).toBe("permission_denied");
      // Gitaly's own answer to a wrong signature.
      expect(err.cause).toMatchObject({ code: status.PERMISSION_DENIED });
      expect(err.message).toContain(server.address);
      expect(err.message).toContain("team/app");
      expect(inspect(err, { depth: 10 })).not.toContain(wrong);
      expect(JSON.stringify(err)).not.toContain(wrong);
    }
  });

  test("no token: no authorization header, which a server with a token refuses", async () => {
    const err = await failure(
      newReader().resolveRef(location(server.address, { token: undefined }), {}, ctx),
    );
    expect(err.code).toBe("permission_denied");
    // Gitaly's own answer to a missing token.
    expect(err.cause).toMatchObject({ code: status.UNAUTHENTICATED });
    expect(server.seen.at(-1)?.metadata.authorization).toBeUndefined();
    const open = await startServer({ token: undefined });
    expect(await newReader().resolveRef(location(open.address, { token: undefined }), {}, ctx)).toBe(head);
    expect(open.seen.at(-1)?.metadata).not.toHaveProperty("authorization");
  });

  test("a stale timestamp is refused (Gitaly allows 30 s of clock skew)", async () => {
    const skewed = newReader({ now: () => Date.now() - 120_000 });
    const err = await failure(skewed.resolveRef(location(server.address), {}, ctx));
    expect(err.code).toBe("permission_denied");
  });
});

describe("metadata, deadlines and aborts", () => {
  let server: GitalyTestServer;
  beforeAll(async () => {
    server = await startServer();
  });

  test("feature flags arrive as gitaly-feature-* metadata on every method", async () => {
    const features = { "gitaly-feature-use-new-thing": "true", bare_flag_name: "false" };
    const loc = location(server.address, { features });
    const reader = newReader();
    const before = server.seen.length;
    await reader.resolveRef(loc, {}, ctx);
    await reader.resolveRef(loc, { commit: head }, ctx);
    await reader.readFile(loc, head, "config.yaml", 100, ctx);
    await reader.listFiles(loc, head, "", ctx);
    const flags = server.featureFlags.slice(before);
    expect(flags).toHaveLength(4);
    for (const seen of flags) {
      expect(seen).toEqual({
        "gitaly-feature-use-new-thing": "true",
        "gitaly-feature-bare-flag-name": "false",
      });
    }
  });

  test("an unreachable Gitaly is unavailable, within the deadline", async () => {
    const port = await closedPort();
    const reader = newReader({ callTimeoutMs: 3000 });
    const started = Date.now();
    const err = await failure(reader.resolveRef(location(`tcp://127.0.0.1:${port}`), {}, ctx));
    expect(err.code).toBe("unavailable");
    expect(err.message).toContain(`tcp://127.0.0.1:${port}`);
    expect(Date.now() - started).toBeLessThan(3000);
  });

  test("a call past its deadline is aborted", async () => {
    const release = server.hold("InfoRefsUploadPack");
    try {
      const err = await failure(
        newReader({ callTimeoutMs: 200 }).resolveRef(location(server.address), {}, ctx),
      );
      expect(err.code).toBe("aborted");
    } finally {
      release();
    }
  });

  test.each([
    [
      "resolveRef",
      (r: GitalyRepositories, l: RepositoryLocation, s: AbortSignal) =>
        r.resolveRef(l, {}, { ...ctx, signal: s }),
      "InfoRefsUploadPack",
    ],
    [
      "FindCommit",
      (r: GitalyRepositories, l: RepositoryLocation, s: AbortSignal) =>
        r.resolveRef(l, { commit: head }, { ...ctx, signal: s }),
      "FindCommit",
    ],
    [
      "readFile",
      (r: GitalyRepositories, l: RepositoryLocation, s: AbortSignal) =>
        r.readFile(l, head, "config.yaml", 100, { ...ctx, signal: s }),
      "TreeEntry",
    ],
    [
      "listFiles",
      (r: GitalyRepositories, l: RepositoryLocation, s: AbortSignal) =>
        r.listFiles(l, head, "", { ...ctx, signal: s }),
      "GetTreeEntries",
    ],
  ] as const)("%s: aborting the signal aborts the call", async (_, run, method) => {
    const release = server.hold(method);
    try {
      const calls = server.calls(method);
      const controller = new AbortController();
      const pending = failure(run(newReader(), location(server.address), controller.signal));
      await until(() => server.calls(method) === calls + 1, 5000, `${method} at the server`);
      controller.abort();
      expect((await pending).code).toBe("aborted");
    } finally {
      release();
    }
  });

  test("an already aborted signal makes no call", async () => {
    const calls = server.calls("InfoRefsUploadPack");
    const signal = AbortSignal.abort();
    const err = await failure(newReader().resolveRef(location(server.address), {}, { ...ctx, signal }));
    expect(err.code).toBe("aborted");
    expect(server.calls("InfoRefsUploadPack")).toBe(calls);
  });

  test("a local location is refused", async () => {
    const err = await failure(newReader().resolveRef({ backend: "local", path: "/tmp/x" }, {}, ctx));
    expect(err.code).toBe("failed");
  });
});

describe("connections", () => {
  test("one connection per address, shared by projects; idle ones are closed; close() closes all", async () => {
    const a = await startServer();
    const b = await startServer();
    const reader = newReader({ idleTimeoutMs: 100 });
    await Promise.all([
      reader.resolveRef(location(a.address), {}, ctx),
      reader.resolveRef(location(a.address, {}, "p.git"), { commit: head }, ctx),
      reader.resolveRef(location(b.address), {}, ctx),
    ]);
    expect(reader.connectedAddresses.sort()).toEqual([a.address, b.address].sort());
    await until(() => reader.connectedAddresses.length === 0, 5000, "idle connections to close");
    // A closed idle connection is reopened on demand.
    expect(await reader.resolveRef(location(a.address), {}, ctx)).toBe(head);
    expect(reader.connectedAddresses).toEqual([a.address]);
    await reader.close();
    expect(reader.connectedAddresses).toEqual([]);
    const err = await failure(reader.resolveRef(location(a.address), {}, ctx));
    expect(err.code).toBe("failed");
  });

  test("a busy connection is not closed for idleness", async () => {
    const server = await startServer();
    const other = await startServer();
    const reader = newReader({ idleTimeoutMs: 30 });
    await reader.resolveRef(location(server.address), {}, ctx);
    const release = server.hold("TreeEntry");
    const pending = reader.readFile(location(server.address), head, "config.yaml", 100, ctx);
    await until(() => server.calls("TreeEntry") === 1, 5000, "TreeEntry at the server");
    // `other` was used after `server`'s last call ended: once its idle connection is closed,
    // `server`'s would have been too, were the open call not keeping it.
    await reader.resolveRef(location(other.address), {}, ctx);
    await until(
      () => !reader.connectedAddresses.includes(other.address),
      5000,
      "the other connection to idle out",
    );
    expect(reader.connectedAddresses).toEqual([server.address]);
    release();
    expect((await pending)?.toString()).toBe("a: 1\n");
  });
});
