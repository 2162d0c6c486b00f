// The Kubernetes API proxy's own certificate, for when none is configured: kubectl never sends a
// bearer token over plain HTTP, so kas serves TLS out of the box. A private CA and a server
// certificate it signed are made once (selfsigned: X.509 that Node's crypto cannot make) and kept
// under kas's data directory, so kubeconfigs that trust the CA keep working across restarts.
//
// Several kas processes may share the data directory and start at once (replicas on one volume,
// `kas kubeconfig` beside a starting kas). The four files are one unit (a key must match its
// certificate, the certificate its CA), so they are kept in generations: `gen-<N>/` holds a full
// set, made in a private temporary directory and published by renaming it to `gen-<N>`. A rename
// onto an existing, non-empty directory fails, so exactly one process publishes each generation;
// the others read the winner's. A generation is never changed after it is published, so no reader
// ever sees a half-written or mismatched set, and a process that dies midway leaves only its
// temporary directory behind (removed by a later start once it is an hour old).
import { createPrivateKey, createPublicKey, randomUUID, X509Certificate } from "node:crypto";
import { mkdir, open, readdir, readFile, rename, rm, stat } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { generate } from "selfsigned";

export interface GeneratedCertificate {
  /** PEM files. */
  caFile: string;
  certificateFile: string;
  keyFile: string;
}

interface Pair {
  cert: string;
  key: string;
}

/** A generation as read: a pair is absent when its files are missing or do not match. */
interface Generation {
  n: number;
  ca?: Pair;
  server?: Pair;
}

const FILES = { caCert: "ca.crt", caKey: "ca.key", cert: "tls.crt", key: "tls.key" } as const;

/** Where the generations are: `<data dir>/kubernetes_api/`. */
export function certificateDir(dataDir: string): string {
  return join(dataDir, "kubernetes_api");
}

/** The files of generation `n`. */
export function generationFiles(dataDir: string, n: number): GeneratedCertificate & { caKeyFile: string } {
  const dir = join(certificateDir(dataDir), `gen-${n}`);
  return {
    caFile: join(dir, FILES.caCert),
    caKeyFile: join(dir, FILES.caKey),
    certificateFile: join(dir, FILES.cert),
    keyFile: join(dir, FILES.key),
  };
}

const DAY = 24 * 3600_000;
/** A certificate this close to its end is made again (a server certificate with the same CA). */
const RENEW_BEFORE_MS = 30 * DAY;
/** Temporary directories of processes that died midway are removed after this long. */
const STALE_TMP_MS = 3600_000;
/** Publishing rounds lost to other processes before giving up (each loss means another process progressed). */
const MAX_ROUNDS = 8;

export interface EnsureCertificateOptions {
  /** Host names and IP addresses the server certificate must name, besides localhost and this host. */
  extraNames?: readonly string[];
  now?: number;
  /** Called with a new generation made but not yet published (tests make processes race here). */
  beforePublish?: () => Promise<void>;
}

/**
 * The latest generation if it serves: a CA that is not expiring, and a server certificate it signed
 * that is not expiring and names every name. Otherwise a new generation: the same CA unless it is
 * missing or expiring, a new server certificate naming the names and those the previous one named.
 */
export async function ensureCertificate(
  dataDir: string,
  options: EnsureCertificateOptions = {},
): Promise<GeneratedCertificate> {
  const dir = certificateDir(dataDir);
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw new Error(
      `cannot create ${dir} for the Kubernetes API proxy's certificate (data_dir): ${(err as Error).message}`,
    );
  }
  const now = options.now ?? Date.now();
  const names = [...new Set(["localhost", "127.0.0.1", "::1", hostname(), ...(options.extraNames ?? [])])];
  await removeStaleTemporaries(dir);
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const latest = await latestGeneration(dir);
    const previous = latest ?? { n: 0, ...(await legacySet(dir)) };
    const { ca: latestCa, server: latestServer } = latest ?? {};
    if (
      latestCa &&
      latestServer &&
      fresh(latestCa.cert, now) &&
      usable(latestServer.cert, latestCa.cert, names, now)
    ) {
      return pathsOf(generationFiles(dataDir, latest!.n));
    }
    const ca = previous.ca && fresh(previous.ca.cert, now) ? previous.ca : await makeCa(now);
    const server =
      previous.server && usable(previous.server.cert, ca.cert, names, now)
        ? previous.server
        : await makeServer(ca, unionNames(names, previous.server, ca), now);
    const n = previous.n + 1;
    if (await publish(dir, n, { ca, server }, options.beforePublish)) {
      await removeOldGenerations(dir, n);
      return pathsOf(generationFiles(dataDir, n));
    }
    // Another process published generation n first: read it (it may not serve our names).
  }
  throw new Error(
    `cannot settle the Kubernetes API proxy's certificate in ${dir}: other processes keep replacing it`,
  );
}

function pathsOf(f: GeneratedCertificate): GeneratedCertificate {
  return { caFile: f.caFile, certificateFile: f.certificateFile, keyFile: f.keyFile };
}

/** Writes the set to a private directory, then renames it to `gen-<n>`: false when another process got there first. */
async function publish(
  dir: string,
  n: number,
  set: { ca: Pair; server: Pair },
  beforePublish: (() => Promise<void>) | undefined,
): Promise<boolean> {
  const tmp = join(dir, `.tmp-${process.pid}-${randomUUID()}`);
  await mkdir(tmp, { mode: 0o700 });
  try {
    await writeDurably(join(tmp, FILES.caKey), set.ca.key);
    await writeDurably(join(tmp, FILES.caCert), set.ca.cert);
    await writeDurably(join(tmp, FILES.key), set.server.key);
    await writeDurably(join(tmp, FILES.cert), set.server.cert);
    await beforePublish?.();
    try {
      await rename(tmp, join(dir, `gen-${n}`));
      return true;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // Linux says ENOTEMPTY, others EEXIST (EPERM on Windows): the name is taken.
      if (code === "ENOTEMPTY" || code === "EEXIST" || code === "EPERM") return false;
      throw err;
    }
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/** Flushed to disk before the rename publishes it: a crash never leaves a published, empty file. */
async function writeDurably(path: string, content: string): Promise<void> {
  const file = await open(path, "wx", 0o600);
  try {
    await file.writeFile(content);
    await file.sync();
  } finally {
    await file.close();
  }
}

/** The highest generation whose files are all there and consistent; undefined when none is. */
async function latestGeneration(dir: string): Promise<Generation | undefined> {
  const numbers = (await readdir(dir))
    .map((name) => /^gen-([1-9]\d{0,8})$/.exec(name)?.[1])
    .filter((n): n is string => n !== undefined)
    .map(Number)
    .sort((a, b) => b - a);
  const top = numbers[0];
  if (top === undefined) return undefined;
  // Published generations are complete; one that is not was damaged by hand: the next replaces it.
  return { n: top, ...(await pairsIn(join(dir, `gen-${top}`))) };
}

/** The files of kas versions before generations (`kubernetes_api/ca.crt`, ...): their CA is kept. */
function legacySet(dir: string): Promise<Omit<Generation, "n">> {
  return pairsIn(dir);
}

async function pairsIn(dir: string): Promise<Omit<Generation, "n">> {
  const ca = await readPair(join(dir, FILES.caCert), join(dir, FILES.caKey));
  const server = await readPair(join(dir, FILES.cert), join(dir, FILES.key));
  return { ...(ca && { ca }), ...(server && { server }) };
}

/** The pair, if both files are there and the key is the certificate's. */
async function readPair(certFile: string, keyFile: string): Promise<Pair | undefined> {
  let pair: Pair;
  try {
    pair = { cert: await readFile(certFile, "utf8"), key: await readFile(keyFile, "utf8") };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  return keyMatches(pair) ? pair : undefined;
}

/** Whether the private key is the one of the certificate's public key (false for anything unparsable). */
export function keyMatches(pair: Pair): boolean {
  try {
    const spki = (k: ReturnType<typeof createPublicKey>) => k.export({ type: "spki", format: "der" });
    return spki(createPublicKey(createPrivateKey(pair.key))).equals(
      spki(new X509Certificate(pair.cert).publicKey),
    );
  } catch {
    return false;
  }
}

function fresh(certPem: string, now: number): boolean {
  try {
    return Date.parse(new X509Certificate(certPem).validTo) - now >= RENEW_BEFORE_MS;
  } catch {
    return false;
  }
}

function usable(certPem: string, caPem: string, names: readonly string[], now: number): boolean {
  try {
    const cert = new X509Certificate(certPem);
    if (!cert.verify(new X509Certificate(caPem).publicKey)) return false;
    if (!fresh(certPem, now)) return false;
    return names.every((n) => (isIp(n) ? cert.checkIP(n) : cert.checkHost(n)) !== undefined);
  } catch {
    return false;
  }
}

const isIp = (name: string) => /^[\d.]+$|:/.test(name);

/**
 * `names` and those the previous server certificate of the same CA named: processes that need
 * different names (each its listen address) converge on one certificate naming them all.
 */
function unionNames(names: readonly string[], previous: Pair | undefined, ca: Pair): string[] {
  const kept: string[] = [];
  try {
    const cert = previous && new X509Certificate(previous.cert);
    if (cert?.verify(new X509Certificate(ca.cert).publicKey)) {
      for (const entry of (cert.subjectAltName ?? "").split(", ")) {
        const m = /^(DNS|IP Address):(.+)$/.exec(entry);
        // Node prints IPv6 in full (0:0:0:0:0:0:0:1): compressed, it is the name given (::1).
        if (m)
          kept.push(
            m[1] === "DNS" || !m[2]!.includes(":")
              ? m[2]!
              : new URL(`http://[${m[2]}]`).hostname.slice(1, -1),
          );
      }
    }
  } catch {
    // An unreadable previous certificate names nothing.
  }
  return [...new Set([...names, ...kept])];
}

/** Generations older than the one before `n` (a process may still be reading that one). */
async function removeOldGenerations(dir: string, n: number): Promise<void> {
  for (const name of await readdir(dir)) {
    const m = /^gen-(\d+)$/.exec(name);
    if (m && Number(m[1]) < n - 1) await rm(join(dir, name), { recursive: true, force: true });
  }
}

/** By the real clock (`now` may be a test's), so another process's directory in the making is never taken. */
async function removeStaleTemporaries(dir: string): Promise<void> {
  const now = Date.now();
  for (const name of await readdir(dir)) {
    if (!name.startsWith(".tmp-")) continue;
    const path = join(dir, name);
    const info = await stat(path).catch(() => undefined);
    if (info && now - info.mtimeMs > STALE_TMP_MS) await rm(path, { recursive: true, force: true });
  }
}

async function makeCa(now: number): Promise<Pair> {
  const ca = await generate([{ name: "commonName", value: `kas Kubernetes API proxy CA (${hostname()})` }], {
    keyType: "ec",
    algorithm: "sha256",
    notBeforeDate: new Date(now - 3600_000),
    notAfterDate: new Date(now + 10 * 365 * DAY),
    extensions: [
      { name: "basicConstraints", cA: true, critical: true },
      { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
    ],
  });
  return { cert: ca.cert, key: ca.private };
}

async function makeServer(ca: Pair, names: readonly string[], now: number): Promise<Pair> {
  const server = await generate([{ name: "commonName", value: "kas Kubernetes API proxy" }], {
    keyType: "ec",
    algorithm: "sha256",
    notBeforeDate: new Date(now - 3600_000),
    notAfterDate: new Date(now + 365 * DAY),
    ca: { key: ca.key, cert: ca.cert },
    extensions: [
      { name: "basicConstraints", cA: false },
      { name: "keyUsage", digitalSignature: true, keyEncipherment: true },
      { name: "extKeyUsage", serverAuth: true },
      {
        name: "subjectAltName",
        altNames: names.map((n) => (isIp(n) ? { type: 7, ip: n } : { type: 2, value: n })),
      },
    ],
  });
  return { cert: server.cert, key: server.private };
}
