// A Gitaly stand-in for tests and benchmarks: a real grpc-js server with the generated services
// of proto/gitaly, answering from real git repositories on disk by running the git CLI as Gitaly
// does. It checks Gitaly's v2 token the way Gitaly does (auth/token.go: no or malformed token ->
// UNAUTHENTICATED, wrong signature or stale timestamp -> PERMISSION_DENIED), records the
// metadata of every call, counts calls and content bytes per method, and can hold calls back.
import { type ChildProcess, spawn } from "node:child_process";
import { createHmac, timingSafeEqual } from "node:crypto";
import { existsSync, statSync } from "node:fs";
import { isAbsolute, join, relative, resolve } from "node:path";
import {
  type Metadata,
  Server,
  type ServerCredentials,
  ServerCredentials as ServerCreds,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServiceError,
  status,
} from "@grpc/grpc-js";
import {
  BlobServiceService,
  type GetBlobsRequest,
  type GetBlobsResponse,
} from "../../proto/gen/gitaly/blob.ts";
import {
  CommitServiceService,
  type FindCommitRequest,
  type FindCommitResponse,
  type GetTreeEntriesRequest,
  type GetTreeEntriesResponse,
  type TreeEntry,
  TreeEntry_EntryType,
  type TreeEntryRequest,
  type TreeEntryResponse,
  TreeEntryResponse_ObjectType,
} from "../../proto/gen/gitaly/commit.ts";
import type { Repository } from "../../proto/gen/gitaly/shared.ts";
import {
  type InfoRefsRequest,
  type InfoRefsResponse,
  SmartHTTPServiceService,
} from "../../proto/gen/gitaly/smarthttp.ts";
import { GIT_ENV, git } from "./git-repo.ts";

export type GitalyMethod = "InfoRefsUploadPack" | "FindCommit" | "TreeEntry" | "GetTreeEntries" | "GetBlobs";

export interface GitalyTestServerOptions {
  /** Storage name -> directory holding its repositories. */
  readonly storages: Readonly<Record<string, string>>;
  /** The shared secret; without one, calls are not authenticated (Gitaly's auth.token unset). */
  readonly token?: string;
  /** Where to listen: loopback TCP on a free port (default) or a unix socket path. */
  readonly listen?: { readonly unix: string } | "tcp";
  /** Serve TLS on TCP with this key and certificate (PEM). */
  readonly tls?: { readonly key: string | Buffer; readonly cert: string | Buffer };
}

export interface SeenCall {
  readonly method: GitalyMethod;
  /** Every metadata entry the call carried (first value of each key). */
  readonly metadata: Readonly<Record<string, string>>;
}

/** Blob content chunk size: Gitaly streams in chunks too, so a large file takes several messages. */
const CHUNK = 16 * 1024;
const TREE_ENTRIES_PER_MESSAGE = 50;
/** Gitaly's tokenValidityDuration. */
const TOKEN_VALIDITY_S = 30;

export class GitalyTestServer {
  /** Calls seen, in order, with their metadata. */
  readonly seen: SeenCall[] = [];
  readonly #calls = new Map<GitalyMethod, number>();
  readonly #contentBytes = new Map<GitalyMethod, number>();
  readonly #holds = new Map<GitalyMethod, Promise<void>>();
  readonly #children = new Set<ChildProcess>();

  private constructor(
    readonly address: string,
    private readonly server: Server,
    private readonly options: GitalyTestServerOptions,
  ) {}

  static async start(options: GitalyTestServerOptions): Promise<GitalyTestServer> {
    const server = new Server();
    const listen = options.listen ?? "tcp";
    let creds: ServerCredentials = ServerCreds.createInsecure();
    if (options.tls) {
      creds = ServerCreds.createSsl(null, [
        { private_key: Buffer.from(options.tls.key), cert_chain: Buffer.from(options.tls.cert) },
      ]);
    }
    const bindTo = listen === "tcp" ? "127.0.0.1:0" : `unix:${listen.unix}`;
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(bindTo, creds, (err, p) => (err ? reject(err) : resolve(p))),
    );
    const address =
      listen === "tcp"
        ? `${options.tls ? "tls://localhost" : "tcp://127.0.0.1"}:${port}`
        : `unix:${listen.unix}`;
    const gitaly = new GitalyTestServer(address, server, options);
    gitaly.#addServices();
    return gitaly;
  }

  /** How many calls of `method` arrived (authenticated or not). */
  calls(method: GitalyMethod): number {
    return this.#calls.get(method) ?? 0;
  }

  /** Object content bytes sent by `method` (blob data for TreeEntry and GetBlobs, advertisement for InfoRefs). */
  contentBytes(method: GitalyMethod): number {
    return this.#contentBytes.get(method) ?? 0;
  }

  /** Feature-flag metadata (`gitaly-feature-*`) of every call seen. */
  get featureFlags(): Record<string, string>[] {
    return this.seen.map((c) =>
      Object.fromEntries(Object.entries(c.metadata).filter(([k]) => k.startsWith("gitaly-feature-"))),
    );
  }

  /** Calls of `method` wait (after being counted) until the returned function is called. */
  hold(method: GitalyMethod): () => void {
    let release!: () => void;
    this.#holds.set(
      method,
      new Promise<void>((r) => {
        release = r;
      }),
    );
    return () => {
      this.#holds.delete(method);
      release();
    };
  }

  async close(): Promise<void> {
    for (const child of this.#children) child.kill();
    await new Promise<void>((resolve) => this.server.tryShutdown(() => resolve()));
    this.server.forceShutdown();
  }

  #addServices(): void {
    this.server.addService(SmartHTTPServiceService, {
      infoRefsUploadPack: (call: ServerWritableStream<InfoRefsRequest, InfoRefsResponse>) =>
        this.#stream(call, "InfoRefsUploadPack", (repo) => this.#infoRefs(call, repo)),
    });
    this.server.addService(BlobServiceService, {
      getBlobs: (call: ServerWritableStream<GetBlobsRequest, GetBlobsResponse>) =>
        this.#stream(call, "GetBlobs", (repo) => this.#getBlobs(call, repo)),
    });
    this.server.addService(CommitServiceService, {
      findCommit: (
        call: ServerUnaryCall<FindCommitRequest, FindCommitResponse>,
        callback: (err: Partial<ServiceError> | null, response?: FindCommitResponse) => void,
      ) => {
        this.#enter(call.metadata, "FindCommit", call.request.repository)
          .then((repo) => this.#findCommit(repo, call.request.revision.toString()))
          .then(
            (response) => callback(null, response),
            (err) => callback(asStatus(err)),
          );
      },
      treeEntry: (call: ServerWritableStream<TreeEntryRequest, TreeEntryResponse>) =>
        this.#stream(call, "TreeEntry", (repo) => this.#treeEntry(call, repo)),
      getTreeEntries: (call: ServerWritableStream<GetTreeEntriesRequest, GetTreeEntriesResponse>) =>
        this.#stream(call, "GetTreeEntries", (repo) => this.#getTreeEntries(call, repo)),
    });
  }

  #stream<Req extends { repository?: Repository | undefined }, Res>(
    call: ServerWritableStream<Req, Res>,
    method: GitalyMethod,
    serve: (repoDir: string) => Promise<void>,
  ): void {
    this.#enter(call.metadata, method, call.request.repository)
      .then(serve)
      .then(
        () => call.end(),
        (err) => call.emit("error", asStatus(err)),
      );
  }

  /** Counts and records the call, checks the token, waits for a hold, finds the repository. */
  async #enter(
    metadata: Metadata,
    method: GitalyMethod,
    repository: Repository | undefined,
  ): Promise<string> {
    this.#calls.set(method, this.calls(method) + 1);
    const md: Record<string, string> = {};
    for (const [key, values] of Object.entries(metadata.getMap())) md[key] = String(values);
    this.seen.push({ method, metadata: md });
    if (this.options.token !== undefined) checkToken(metadata, this.options.token);
    await this.#holds.get(method);
    return this.#repositoryDir(repository);
  }

  #repositoryDir(repository: Repository | undefined): string {
    if (!repository) throw statusError(status.INVALID_ARGUMENT, "empty Repository");
    const root = this.options.storages[repository.storageName];
    if (root === undefined) {
      throw statusError(
        status.INVALID_ARGUMENT,
        `GetStorageByName: no such storage: "${repository.storageName}"`,
      );
    }
    const dir = resolve(root, repository.relativePath);
    const rel = relative(root, dir);
    if (repository.relativePath === "" || rel.startsWith("..") || isAbsolute(rel)) {
      throw statusError(status.INVALID_ARGUMENT, "relative path escapes root directory");
    }
    if (
      !existsSync(join(dir, "HEAD")) ||
      !statSync(join(dir, "objects"), { throwIfNoEntry: false })?.isDirectory()
    ) {
      throw statusError(status.NOT_FOUND, "repository not found");
    }
    return dir;
  }

  /** `git upload-pack --advertise-refs`, after the "# service=git-upload-pack" preamble as Gitaly sends it. */
  async #infoRefs(
    call: ServerWritableStream<InfoRefsRequest, InfoRefsResponse>,
    repo: string,
  ): Promise<void> {
    const preamble = Buffer.from("001e# service=git-upload-pack\n0000");
    this.#count("InfoRefsUploadPack", preamble.length);
    call.write({ data: preamble });
    await this.#pipeGit(
      call,
      repo,
      ["upload-pack", "--stateless-rpc", "--advertise-refs", repo],
      Number.POSITIVE_INFINITY,
      (chunk) => {
        this.#count("InfoRefsUploadPack", chunk.length);
        call.write({ data: chunk });
      },
    );
  }

  async #findCommit(repo: string, revision: string): Promise<FindCommitResponse> {
    const oid = await tryGit(repo, [
      "rev-parse",
      "--verify",
      "--quiet",
      "--end-of-options",
      `${revision}^{commit}`,
    ]);
    if (!oid) return { commit: undefined };
    const format = ["%H", "%P", "%an", "%ae", "%at", "%cn", "%ce", "%ct", "%s", "%b"].join("%x00");
    const out = await git(repo, ["show", "-s", `--format=${format}`, oid.trim()]);
    const [id, parents, an, ae, at, cn, ce, ct, subject, body] = out.split("\0");
    const author = (name?: string, email?: string, time?: string) => ({
      name: Buffer.from(name ?? ""),
      email: Buffer.from(email ?? ""),
      date: new Date(Number(time) * 1000),
    });
    const bodyBuffer = Buffer.from((body ?? "").replace(/\n$/, ""));
    return {
      commit: {
        id: id!,
        subject: Buffer.from(subject ?? ""),
        body: bodyBuffer,
        author: author(an, ae, at),
        committer: author(cn, ce, ct),
        parentIds: parents ? parents.split(" ") : [],
        bodySize: String(bodyBuffer.length),
      },
    };
  }

  async #treeEntry(
    call: ServerWritableStream<TreeEntryRequest, TreeEntryResponse>,
    repo: string,
  ): Promise<void> {
    const { revision, path, limit } = call.request;
    const entry = await lsTree(repo, revision.toString(), path.toString());
    if (!entry) throw statusError(status.NOT_FOUND, "tree entry not found");
    const size = Number((await git(repo, ["cat-file", "-s", entry.oid])).trim());
    const head = { oid: entry.oid, size: String(size), mode: entry.mode };
    if (entry.type !== "blob") {
      const type =
        entry.type === "tree" ? TreeEntryResponse_ObjectType.TREE : TreeEntryResponse_ObjectType.COMMIT;
      call.write({ ...head, type, data: Buffer.alloc(0) });
      return;
    }
    const max = Number(limit) > 0 ? Math.min(Number(limit), size) : size;
    let first = true;
    const send = (data: Buffer) => {
      this.#count("TreeEntry", data.length);
      call.write(
        first
          ? { ...head, type: TreeEntryResponse_ObjectType.BLOB, data }
          : // Later chunks carry only data, as Gitaly's do.
            { type: TreeEntryResponse_ObjectType.COMMIT, oid: "", size: "0", mode: 0, data },
      );
      first = false;
    };
    await this.#pipeGit(call, repo, ["cat-file", "blob", entry.oid], max, (chunk) => {
      for (let at = 0; at < chunk.length; at += CHUNK) send(chunk.subarray(at, at + CHUNK));
    });
    if (first) send(Buffer.alloc(0));
  }

  /**
   * Gitaly's GetBlobs, in request order: per revision:path a first message with size, oid, mode,
   * revision and path (oid empty when there is no blob there; is_submodule for a gitlink), then
   * data chunks, at most `limit` bytes of each blob (negative: all).
   */
  async #getBlobs(
    call: ServerWritableStream<GetBlobsRequest, GetBlobsResponse>,
    repo: string,
  ): Promise<void> {
    const limit = Number(call.request.limit);
    const empty = { size: "0", data: Buffer.alloc(0), oid: "", isSubmodule: false, mode: 0, revision: "" };
    // Two git processes per revision, not three per blob: thousands of paths in one call stay quick.
    const requests = call.request.revisionPaths.map(({ revision, path }) => ({ revision, path }));
    const entries = new Map<string, Map<string, TreeEntryLong>>();
    for (const revision of new Set(requests.map((r) => r.revision))) {
      entries.set(
        revision,
        await lsTreeLong(
          repo,
          revision,
          requests.filter((r) => r.revision === revision).map((r) => r.path.toString()),
        ),
      );
    }
    const found = requests.map((r) => entries.get(r.revision)?.get(cleanPath(r.path.toString())));
    const wanted = found.filter(
      (e): e is TreeEntryLong => e?.type === "blob" && (limit < 0 ? e.size : Math.min(limit, e.size)) > 0,
    );
    const contents = await catBlobs(
      repo,
      wanted.map((e) => e.oid),
    );
    for (const [i, named] of requests.entries()) {
      // Like Gitaly, stop producing once the client has gone.
      if (call.cancelled) return;
      const entry = found[i];
      if (!entry || entry.type === "tree") {
        call.write({ ...empty, ...named });
        continue;
      }
      if (entry.type === "commit") {
        call.write({ ...empty, ...named, oid: entry.oid, mode: entry.mode, isSubmodule: true });
        continue;
      }
      const max = limit < 0 ? entry.size : Math.min(limit, entry.size);
      let first = true;
      const send = (data: Buffer) => {
        this.#count("GetBlobs", data.length);
        call.write(
          first
            ? { ...empty, ...named, size: String(entry.size), oid: entry.oid, mode: entry.mode, data }
            : { ...empty, path: Buffer.alloc(0), data },
        );
        first = false;
      };
      const content = max > 0 ? contents.get(entry.oid)!.subarray(0, max) : Buffer.alloc(0);
      for (let at = 0; at < content.length; at += CHUNK) send(content.subarray(at, at + CHUNK));
      if (first) send(Buffer.alloc(0));
    }
  }

  async #getTreeEntries(
    call: ServerWritableStream<GetTreeEntriesRequest, GetTreeEntriesResponse>,
    repo: string,
  ): Promise<void> {
    const revision = call.request.revision.toString();
    let path = call.request.path.toString().replace(/\/+$/, "");
    if (path === ".") path = "";
    const commitOid = await tryGit(repo, [
      "rev-parse",
      "--verify",
      "--quiet",
      "--end-of-options",
      `${revision}^{commit}`,
    ]);
    if (!commitOid) throw statusError(status.NOT_FOUND, "revision not found");
    const commit = commitOid.trim();
    const rootOid = (await git(repo, ["rev-parse", `${commit}^{tree}`])).trim();
    const type = (await tryGit(repo, ["cat-file", "-t", `${commit}:${path}`]))?.trim();
    if (type !== "tree") throw statusError(status.NOT_FOUND, "invalid revision or path");
    const args = ["ls-tree", "-z", "--full-tree", ...(call.request.recursive ? ["-r", "-t"] : []), commit];
    const out = await git(repo, path === "" ? args : [...args, "--", `${path}/`]);
    const entries: TreeEntry[] = [];
    for (const record of out.split("\0")) {
      if (record === "") continue;
      const [meta, entryPath] = splitOnce(record, "\t");
      if (path !== "" && !entryPath.startsWith(`${path}/`)) continue;
      const [mode, kind, oid] = meta.split(" ");
      entries.push({
        oid: oid!,
        rootOid,
        path: Buffer.from(entryPath),
        type:
          kind === "blob"
            ? TreeEntry_EntryType.BLOB
            : kind === "tree"
              ? TreeEntry_EntryType.TREE
              : TreeEntry_EntryType.COMMIT,
        mode: Number.parseInt(mode!, 8),
        commitOid: commit,
        flatPath: Buffer.from(entryPath),
      });
    }
    for (let at = 0; at < entries.length; at += TREE_ENTRIES_PER_MESSAGE) {
      call.write({ entries: entries.slice(at, at + TREE_ENTRIES_PER_MESSAGE) });
    }
  }

  #count(method: GitalyMethod, bytes: number): void {
    this.#contentBytes.set(method, this.contentBytes(method) + bytes);
  }

  /** Runs git, handing at most `max` bytes of its output to `onChunk`, then stops it. */
  #pipeGit(
    call: {
      on(event: "cancelled", listener: () => void): unknown;
      off(event: "cancelled", listener: () => void): unknown;
    },
    repo: string,
    args: string[],
    max: number,
    onChunk: (chunk: Buffer) => void,
  ): Promise<void> {
    return new Promise((resolvePipe, reject) => {
      const child = spawn("git", args, { cwd: repo, env: GIT_ENV, stdio: ["ignore", "pipe", "pipe"] });
      this.#children.add(child);
      // Like Gitaly, stop producing once the client has gone.
      const onCancelled = () => child.kill();
      call.on("cancelled", onCancelled);
      let sent = 0;
      let stderr = "";
      child.stderr.on("data", (d: Buffer) => {
        stderr += d.toString();
      });
      child.stdout.on("data", (chunk: Buffer) => {
        if (sent >= max) return;
        const part = chunk.subarray(0, max - sent);
        sent += part.length;
        onChunk(part);
        if (sent >= max) {
          child.stdout.destroy();
          child.kill();
        }
      });
      child.on("error", reject);
      child.on("close", (code) => {
        this.#children.delete(child);
        call.off("cancelled", onCancelled);
        if (code === 0 || sent >= max || child.killed) resolvePipe();
        else reject(statusError(status.INTERNAL, `git ${args[0]}: ${stderr.trim()}`));
      });
    });
  }
}

/** Gitaly's check (auth/token.go), written from its description: v2 HMAC of a recent timestamp. */
function checkToken(metadata: Metadata, secret: string): void {
  const header = String(metadata.get("authorization")[0] ?? "");
  const match = /^bearer\s+(.*)$/i.exec(header);
  const parts = match ? match[1]!.split(".") : [];
  if (parts.length !== 3 || !/^[0-9a-f]*$/i.test(parts[1]!)) {
    throw statusError(status.UNAUTHENTICATED, "authentication required");
  }
  const [version, signature, message] = parts as [string, string, string];
  const expected = createHmac("sha256", secret).update(message).digest();
  const given = Buffer.from(signature, "hex");
  const signed = given.length === expected.length && timingSafeEqual(given, expected);
  const issued = Number(message);
  const fresh = /^\d+$/.test(message) && Math.abs(Date.now() / 1000 - issued) <= TOKEN_VALIDITY_S;
  if (version !== "v2" || !signed || !fresh) throw statusError(status.PERMISSION_DENIED, "permission denied");
}

interface TreeEntryLong {
  mode: number;
  type: string;
  oid: string;
  size: number;
}

function cleanPath(path: string): string {
  return path.replace(/^\/+|\/+$/g, "");
}

/** The entries at `paths` of `revision` (one ls-tree, paths taken literally); none for a bad revision. */
async function lsTreeLong(
  repo: string,
  revision: string,
  paths: string[],
): Promise<Map<string, TreeEntryLong>> {
  const clean = [...new Set(paths.map(cleanPath).filter((p) => p !== ""))];
  const entries = new Map<string, TreeEntryLong>();
  if (clean.length === 0) return entries;
  const out = await tryGit(repo, [
    "--literal-pathspecs",
    "ls-tree",
    "-z",
    "-l",
    "--full-tree",
    "--end-of-options",
    revision,
    "--",
    ...clean,
  ]);
  for (const record of out?.split("\0") ?? []) {
    if (record === "") continue;
    const [meta, path] = splitOnce(record, "\t");
    const [mode, type, oid, size] = meta.split(/ +/);
    entries.set(path, { mode: Number.parseInt(mode!, 8), type: type!, oid: oid!, size: Number(size) || 0 });
  }
  return entries;
}

/** Each blob's content, from one `git cat-file --batch`. */
function catBlobs(repo: string, oids: string[]): Promise<Map<string, Buffer>> {
  const unique = [...new Set(oids)];
  if (unique.length === 0) return Promise.resolve(new Map());
  return new Promise((resolve, reject) => {
    const child = spawn("git", ["cat-file", "--batch"], { cwd: repo, env: GIT_ENV });
    const chunks: Buffer[] = [];
    child.stdout.on("data", (c: Buffer) => chunks.push(c));
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) return reject(new Error(`git cat-file --batch exited ${code}`));
      const out = Buffer.concat(chunks);
      const contents = new Map<string, Buffer>();
      let at = 0;
      for (const oid of unique) {
        const eol = out.indexOf(10, at);
        const size = Number(out.subarray(at, eol).toString("latin1").split(" ")[2]);
        contents.set(oid, out.subarray(eol + 1, eol + 1 + size));
        at = eol + 1 + size + 1;
      }
      resolve(contents);
    });
    child.stdin.end(`${unique.join("\n")}\n`);
  });
}

async function lsTree(
  repo: string,
  revision: string,
  path: string,
): Promise<{ mode: number; type: string; oid: string } | undefined> {
  const clean = path.replace(/^\/+|\/+$/g, "");
  if (clean === "") return undefined;
  const out = await tryGit(repo, ["ls-tree", "-z", "--full-tree", "--end-of-options", revision, "--", clean]);
  const record = out?.split("\0").find((r) => r !== "" && splitOnce(r, "\t")[1] === clean);
  if (!record) return undefined;
  const [mode, type, oid] = splitOnce(record, "\t")[0].split(" ");
  return { mode: Number.parseInt(mode!, 8), type: type!, oid: oid! };
}

async function tryGit(repo: string, args: string[]): Promise<string | undefined> {
  try {
    return await git(repo, args);
  } catch {
    return undefined;
  }
}

function splitOnce(text: string, sep: string): [string, string] {
  const at = text.indexOf(sep);
  return at < 0 ? [text, ""] : [text.slice(0, at), text.slice(at + sep.length)];
}

function statusError(code: status, details: string): Partial<ServiceError> & Error {
  return Object.assign(new Error(details), { code, details });
}

function asStatus(err: unknown): Partial<ServiceError> {
  if (err instanceof Error && typeof (err as Partial<ServiceError>).code === "number")
    return err as ServiceError;
  return statusError(status.INTERNAL, err instanceof Error ? err.message : String(err));
}
