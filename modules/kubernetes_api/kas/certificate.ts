// The Kubernetes API proxy's own certificate, for when none is configured: kubectl never sends a
// bearer token over plain HTTP, so kas serves TLS out of the box. A private CA and a server
// certificate it signed are made once (selfsigned: X.509 that Node's crypto cannot make) and kept
// under kas's data directory, so kubeconfigs that trust the CA keep working across restarts.
import { X509Certificate } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { generate } from "selfsigned";

export interface GeneratedCertificate {
  /** PEM files. */
  caFile: string;
  certificateFile: string;
  keyFile: string;
}

/** Where the files are: `<data dir>/kubernetes_api/`. */
export function certificateFiles(dataDir: string): GeneratedCertificate & { caKeyFile: string } {
  const dir = join(dataDir, "kubernetes_api");
  return {
    caFile: join(dir, "ca.crt"),
    caKeyFile: join(dir, "ca.key"),
    certificateFile: join(dir, "tls.crt"),
    keyFile: join(dir, "tls.key"),
  };
}

const DAY = 24 * 3600_000;
/** A server certificate this close to its end is made again (with the same CA). */
const RENEW_BEFORE_MS = 30 * DAY;

/**
 * The kept certificate, or a new one: a new CA only when there is none; a new server certificate
 * when it is missing, expiring, or does not name `names` (host names and IP addresses).
 */
export async function ensureCertificate(
  dataDir: string,
  extraNames: readonly string[] = [],
  now = Date.now(),
): Promise<GeneratedCertificate> {
  const files = certificateFiles(dataDir);
  try {
    await mkdir(join(dataDir, "kubernetes_api"), { recursive: true, mode: 0o700 });
  } catch (err) {
    throw new Error(
      `cannot create ${join(dataDir, "kubernetes_api")} for the Kubernetes API proxy's certificate (data_dir): ${(err as Error).message}`,
    );
  }
  const names = [...new Set(["localhost", "127.0.0.1", "::1", hostname(), ...extraNames])];
  let ca = await readPair(files.caFile, files.caKeyFile);
  if (ca === undefined || Date.parse(new X509Certificate(ca.cert).validTo) - now < RENEW_BEFORE_MS) {
    ca = await makeCa(now);
    await writeAtomically(files.caKeyFile, ca.key);
    await writeAtomically(files.caFile, ca.cert);
  }
  const server = await readPair(files.certificateFile, files.keyFile);
  if (server === undefined || !usable(server.cert, ca.cert, names, now)) {
    const made = await makeServer(ca, names, now);
    await writeAtomically(files.keyFile, made.key);
    await writeAtomically(files.certificateFile, made.cert);
  }
  return { caFile: files.caFile, certificateFile: files.certificateFile, keyFile: files.keyFile };
}

function usable(certPem: string, caPem: string, names: readonly string[], now: number): boolean {
  const cert = new X509Certificate(certPem);
  if (!cert.verify(new X509Certificate(caPem).publicKey)) return false;
  if (Date.parse(cert.validTo) - now < RENEW_BEFORE_MS) return false;
  return names.every((n) => (/^[\d.]+$|:/.test(n) ? cert.checkIP(n) : cert.checkHost(n)) !== undefined);
}

async function readPair(
  certFile: string,
  keyFile: string,
): Promise<{ cert: string; key: string } | undefined> {
  try {
    return { cert: await readFile(certFile, "utf8"), key: await readFile(keyFile, "utf8") };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

async function writeAtomically(path: string, content: string): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, content, { mode: 0o600 });
  await rename(tmp, path);
}

async function makeCa(now: number): Promise<{ cert: string; key: string }> {
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

async function makeServer(
  ca: { cert: string; key: string },
  names: readonly string[],
  now: number,
): Promise<{ cert: string; key: string }> {
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
        altNames: names.map((n) => (/^[\d.]+$|:/.test(n) ? { type: 7, ip: n } : { type: 2, value: n })),
      },
    ],
  });
  return { cert: server.cert, key: server.private };
}
