// Ref lookups of the local backend without a git process while the ref has not moved. kas polls
// every manifest project's ref every 20 s and every configuration project's default branch every
// 300 s; each lookup spawned git (two processes for the default branch), and forking a kas of 1 GB
// costs 6-12 ms of CPU. The answer is kept with a signature of the files git's ref storage keeps it
// in, and a poll whose files are unchanged takes the kept answer: a few stat calls, no process.
//
// The files (the "files" ref backend, and "reftable"):
// - `<gitdir>/HEAD`: where the default branch is (and which repository this is: a repository
//   replaced at the same path has new files);
// - `<gitdir>/<refname>`, the loose ref (for the default branch: the ref HEAD names);
// - `<gitdir>/packed-refs`, where `git pack-refs` (and gc) moves refs;
// - `<gitdir>/reftable/tables.list`, rewritten by every update of a reftable repository;
// - whether `<repo>/.git` is a directory (which one) or absent (a bare repository).
// Why stat is enough: git never writes a ref file in place. An update writes `<file>.lock` and
// renames it over the file (packed-refs and tables.list too), so the file has a new inode while
// the old one still exists; `pack-refs` and deletion remove the loose file and rewrite packed-refs;
// `git symbolic-ref HEAD ...` rewrites HEAD; an annotated tag is peeled through objects, and an
// object never changes for its id. The signature is (type, device, inode, size, mtime, ctime), in
// nanoseconds, or "absent". It is taken BEFORE git runs, so a change racing the git run makes the
// next poll's signature differ (a signature taken after could describe a newer state than the
// answer). An inode can be reused by a later update, and timestamps are coarse (a kernel tick; a
// second on some file systems): two updates of a ref within one tick could leave an equal
// signature. So a file changed less than `RACY_MS` before the signature is not trusted (git's
// "racily clean" index entries): the answer is not kept, and any later change has a later
// timestamp than a kept signature. What remains (a clock set back, a network file system that
// caches attributes) is bounded by `maxAgeMs`: an older answer is looked up again whatever the
// files say.
//
// Never kept (git runs on every poll, as before): `.git` a file (a linked worktree or a submodule:
// the refs live elsewhere), a gitdir with `commondir` (a linked worktree's), a loose ref that is
// itself a symbolic ref (`ref: ...`: its target's file is not in the signature) or a symlink or not
// a regular file, a file that could not be read, and errors. Commit selectors need no cache.
import { type BigIntStats, constants } from "node:fs";
import { lstat, open, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { refNameProblem } from "./git-names.ts";

export interface RefCacheOptions {
  /** Answers kept at most, least recently used out. Default 10 000; 0 keeps none. */
  maxEntries?: number;
  /**
   * An answer older than this is looked up again, whatever its files say: the bound on staleness
   * that stat cannot see. Default 10 minutes (over the configuration poll period of 300 s, so those
   * polls are answered too).
   */
  maxAgeMs?: number;
  /** The wall clock in ms (compared with file times too). Default Date.now; tests move it. */
  now?: () => number;
}

/** A file changed this recently (ms) is not trusted: timestamps are coarse. */
const RACY_MS = 3000;
const ABSENT = "-";
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/**
 * What HEAD held when it was read (files backend, a regular file): the ref it names (not itself a
 * symbolic ref), or a detached commit. Git then needs one process instead of two.
 */
export type HeadState = { readonly ref: string } | { readonly detached: true };

/** Taken before git runs: what to keep the answer with (undefined: never kept), and HEAD. */
export interface RefProbe {
  readonly key: string;
  readonly at: number;
  readonly files: Watched | undefined;
  readonly head: HeadState | undefined;
}

/** The files an answer depends on, and their signature. */
interface Watched {
  readonly repo: string;
  readonly gitdir: string;
  /** The loose ref file, relative to gitdir; undefined for a detached HEAD or a reftable repository. */
  readonly loose: string | undefined;
  readonly signature: string;
  /** A detached HEAD's answer depends on objects being present: "none" is not kept. */
  readonly detached: boolean;
}

interface Entry extends Watched {
  readonly oid: string | undefined;
  readonly at: number;
}

export type RefLookup =
  | { readonly hit: true; readonly oid: string | undefined }
  | { readonly hit: false; readonly probe: RefProbe };

export class RefCache {
  readonly #maxEntries: number;
  readonly #maxAgeMs: number;
  readonly #now: () => number;
  /** Insertion order is recency order: a hit is moved to the end. */
  readonly #entries = new Map<string, Entry>();

  constructor(opts: RefCacheOptions = {}) {
    this.#maxEntries = opts.maxEntries ?? 10_000;
    this.#maxAgeMs = opts.maxAgeMs ?? 10 * 60_000;
    this.#now = opts.now ?? Date.now;
    if (!(this.#maxEntries >= 0)) throw new RangeError("maxEntries must be >= 0");
    if (!(this.#maxAgeMs >= 0)) throw new RangeError("maxAgeMs must be >= 0");
  }

  /**
   * The kept answer for `refname` ("HEAD": the default branch) in `repo` when its files are
   * unchanged and it is younger than the max age; else a probe of the files, to pass to `keep`
   * with git's answer.
   */
  async lookup(repo: string, refname: string): Promise<RefLookup> {
    const path = resolve(repo);
    const key = `${refname}\0${path}`;
    const entry = this.#entries.get(key);
    const at = this.#now();
    if (entry) {
      // A clock set back expires it too: its age is unknown.
      const young = at >= entry.at && at - entry.at < this.#maxAgeMs;
      const hit = young && (await currentSignature(entry)) === entry.signature;
      // Meanwhile the entry may have been replaced (a concurrent miss) or dropped: leave those be.
      if (this.#entries.get(key) === entry) {
        this.#entries.delete(key);
        if (hit) this.#entries.set(key, entry);
      }
      if (hit) return { hit: true, oid: entry.oid };
    }
    const { files, head } = await probe(path, refname, at);
    return { hit: false, probe: { key, at, files, head } };
  }

  /** Keeps git's answer, found after `probe` was taken, when its files allow. */
  keep(probe: RefProbe, oid: string | undefined): boolean {
    const { files } = probe;
    if (!files || (files.detached && oid === undefined) || this.#maxEntries === 0) {
      this.#entries.delete(probe.key);
      return false;
    }
    this.#entries.delete(probe.key);
    this.#entries.set(probe.key, { ...files, oid, at: probe.at });
    for (const key of this.#entries.keys()) {
      if (this.#entries.size <= this.#maxEntries) break;
      this.#entries.delete(key);
    }
    return true;
  }
}

type Stat = BigIntStats | typeof ABSENT;

const isMissing = (err: unknown) => {
  const code = (err as NodeJS.ErrnoException).code;
  return code === "ENOENT" || code === "ENOTDIR";
};

/** A file's stat (not following a symlink), ABSENT, or undefined when it cannot be read. */
async function lstatOf(path: string): Promise<Stat | undefined> {
  try {
    return await lstat(path, { bigint: true });
  } catch (err) {
    return isMissing(err) ? ABSENT : undefined;
  }
}

function signatureOf(st: Stat): string {
  if (st === ABSENT) return ABSENT;
  return `${st.mode}:${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
}

/** `<repo>/.git`: ABSENT (bare), a directory (by identity), or undefined (a file: a worktree's link). */
async function gitLink(repo: string): Promise<string | undefined> {
  try {
    const st = await stat(join(repo, ".git"), { bigint: true });
    return st.isDirectory() ? `d:${st.dev}:${st.ino}` : undefined;
  } catch (err) {
    return isMissing(err) ? ABSENT : undefined;
  }
}

function signature(link: string, head: Stat, packed: Stat, tables: Stat, loose: Stat | undefined): string {
  const files = [head, packed, tables, ...(loose === undefined ? [] : [loose])];
  return [link, ...files.map(signatureOf)].join("|");
}

/** The signature of `watched`'s files now (stat calls only); undefined when one cannot be read. */
async function currentSignature(watched: Watched): Promise<string | undefined> {
  const { repo, gitdir, loose } = watched;
  const [link, head, packed, tables, looseStat] = await Promise.all([
    gitLink(repo),
    lstatOf(join(gitdir, "HEAD")),
    lstatOf(join(gitdir, "packed-refs")),
    lstatOf(join(gitdir, "reftable", "tables.list")),
    loose === undefined ? undefined : lstatOf(join(gitdir, loose)),
  ]);
  if (link === undefined || !head || !packed || !tables || (loose !== undefined && !looseStat))
    return undefined;
  return signature(link, head, packed, tables, looseStat);
}

/**
 * A regular file's stat and first bytes, through one descriptor (both of the same file); ABSENT;
 * or undefined (a symlink, not a regular file, unreadable).
 */
async function readSmall(
  path: string,
): Promise<{ st: BigIntStats; text: string } | typeof ABSENT | undefined> {
  let fh: Awaited<ReturnType<typeof open>>;
  try {
    // O_NOFOLLOW: a symlink fails (ELOOP); O_NONBLOCK: a FIFO does not block.
    fh = await open(path, READ_FLAGS);
  } catch (err) {
    return isMissing(err) ? ABSENT : undefined;
  }
  try {
    const st = await fh.stat({ bigint: true });
    if (!st.isFile()) return undefined;
    const buf = Buffer.alloc(256);
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    return { st, text: buf.toString("latin1", 0, bytesRead) };
  } catch {
    return undefined;
  } finally {
    await fh.close().catch(() => {});
  }
}

/** What a files-backend HEAD holds: a ref under refs/ with a name git accepts (so its path stays in gitdir), or a commit id. */
export function headState(text: string): HeadState | undefined {
  const sym = /^ref: (refs\/\S+)\n?$/.exec(text);
  if (sym) return refNameProblem(sym[1]!.slice("refs/".length)) ? undefined : { ref: sym[1]! };
  return /^(?:[0-9a-f]{40}|[0-9a-f]{64})\n?$/.test(text) ? { detached: true } : undefined;
}

/** Changed within RACY_MS before `at` (or after it): its timestamps cannot tell a next change apart. */
function racy(st: Stat, at: number): boolean {
  if (st === ABSENT) return false;
  const since = BigInt(at - RACY_MS) * 1_000_000n;
  return st.mtimeNs > since || st.ctimeNs > since;
}

/**
 * Before git runs: the files `refname` ("HEAD": the default branch) depends on and their
 * signature (undefined: not to be kept), and what HEAD holds.
 */
async function probe(
  repo: string,
  refname: string,
  at: number,
): Promise<{ files: Watched | undefined; head: HeadState | undefined }> {
  const none = { files: undefined, head: undefined };
  const link = await gitLink(repo);
  if (link === undefined) return none;
  const gitdir = link === ABSENT ? repo : join(repo, ".git");
  const [commondir, packed, tables, headFile] = await Promise.all([
    lstatOf(join(gitdir, "commondir")),
    lstatOf(join(gitdir, "packed-refs")),
    lstatOf(join(gitdir, "reftable", "tables.list")),
    readSmall(join(gitdir, "HEAD")),
  ]);
  if (commondir !== ABSENT || !packed || !tables || !headFile || headFile === ABSENT) return none;
  // A reftable repository's HEAD file is a stub: every ref, HEAD included, is in tables.list,
  // which every update rewrites.
  const reftable = tables !== ABSENT;
  const head = reftable ? undefined : headState(headFile.text);
  let loose: string | undefined;
  if (refname !== "HEAD") loose = refname;
  else if (!reftable) {
    if (head === undefined) return none;
    if ("ref" in head) loose = head.ref;
  }
  let looseStat: Stat | undefined;
  if (loose !== undefined) {
    const file = await readSmall(join(gitdir, loose));
    // A symbolic ref: git follows it to a file that is not watched (and `symbolic-ref HEAD` would
    // name its target): neither kept nor read with one process.
    if (file === undefined || (file !== ABSENT && file.text.startsWith("ref:"))) return none;
    looseStat = file === ABSENT ? ABSENT : file.st;
  }
  const stats = [headFile.st, packed, tables, ...(looseStat === undefined ? [] : [looseStat])];
  if (stats.some((st) => racy(st, at))) return { files: undefined, head };
  return {
    head,
    files: {
      repo,
      gitdir,
      loose,
      signature: signature(link, headFile.st, packed, tables, looseStat),
      detached: refname === "HEAD" && head !== undefined && "detached" in head,
    },
  };
}
