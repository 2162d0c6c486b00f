// The certificate kas makes for its Kubernetes API proxy, kept under data_dir: several kas
// processes sharing the directory and starting at once end with one CA, one certificate and one
// key, and never see a half-written or mismatched set.
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  certificateDir,
  ensureCertificate,
  type GeneratedCertificate,
  keyMatches,
} from "../../../../modules/kubernetes_api/kas/certificate.ts";
import { until, within } from "../../../support/until.ts";

const CHILD = join(import.meta.dirname, "support/ensure-certificate-child.ts");
const DAY = 24 * 3600_000;

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "kas-cert-"));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const fresh = async () => mkdtemp(join(root, "data-"));

interface ChildResult {
  paths: GeneratedCertificate;
  ca: string;
  cert: string;
  key: string;
}

/** A child process running ensureCertificate on `dataDir`, with its output lines as they come. */
function child(dataDir: string) {
  const proc: ChildProcessWithoutNullStreams = spawn(process.execPath, ["--import", "tsx", CHILD, dataDir], {
    env: { PATH: process.env.PATH },
  });
  const lines: string[] = [];
  let partial = "";
  let stderr = "";
  proc.stdout.on("data", (d: Buffer) => {
    const parts = (partial + d.toString()).split("\n");
    partial = parts.pop()!;
    lines.push(...parts);
  });
  proc.stderr.on("data", (d: Buffer) => {
    stderr += d;
  });
  const exited = new Promise<number | null>((resolve) => proc.once("exit", resolve));
  return { proc, lines, exited, stderr: () => stderr };
}

/** Whether a set of files is whole and consistent: the key is the certificate's, the CA signed it. */
function consistent(set: { ca: string; cert: string; key: string; caKey?: string }): boolean {
  try {
    const signed = new X509Certificate(set.cert).verify(new X509Certificate(set.ca).publicKey);
    const caPair = set.caKey === undefined || keyMatches({ cert: set.ca, key: set.caKey });
    return signed && caPair && keyMatches({ cert: set.cert, key: set.key });
  } catch {
    return false;
  }
}

/** Every published generation in the directory, each checked whole: the observer's view. */
async function observe(dataDir: string): Promise<{ generations: string[]; bad: string[] }> {
  const dir = certificateDir(dataDir);
  const generations = (await readdir(dir).catch(() => [] as string[])).filter((n) => n.startsWith("gen-"));
  const bad: string[] = [];
  for (const gen of generations) {
    const read = (f: string) => readFile(join(dir, gen, f), "utf8");
    try {
      const set = {
        ca: await read("ca.crt"),
        caKey: await read("ca.key"),
        cert: await read("tls.crt"),
        key: await read("tls.key"),
      };
      if (!consistent(set)) bad.push(`${gen}: inconsistent`);
    } catch (err) {
      // Pruned between listing and reading is fine; anything else is not.
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") bad.push(`${gen}: ${(err as Error).message}`);
      else if ((await readdir(dir)).includes(gen)) bad.push(`${gen}: a file is missing`);
    }
  }
  return { generations, bad };
}

describe("two kas processes make the certificate at once, sharing data_dir", () => {
  test("both made their own, both publish at once: exactly one wins, both end with its CA, certificate and key", async () => {
    const dataDir = await fresh();
    const children = [child(dataDir), child(dataDir)];
    try {
      // Both have found no certificate and made a whole set of their own, unpublished.
      await until(() => children.every((c) => c.lines.includes("built")), 30_000, "both children built");
      const held = await readdir(certificateDir(dataDir));
      expect(held.filter((n) => n.startsWith("gen-"))).toEqual([]);
      expect(held.filter((n) => n.startsWith(".tmp-"))).toHaveLength(2);

      for (const c of children) c.proc.stdin.write("publish\n");
      // Watch the directory until both are done: no generation is ever seen incomplete or mismatched.
      const seen = new Set<string>();
      const problems: string[] = [];
      const done = Promise.all(children.map((c) => c.exited));
      let finished = false;
      void done.then(() => {
        finished = true;
      });
      await until(
        async () => {
          const view = await observe(dataDir);
          for (const g of view.generations) seen.add(g);
          problems.push(...view.bad);
          return finished;
        },
        30_000,
        "both children done",
      );
      const codes = await within(done, 1000, "exit codes");
      expect(codes, children.map((c) => c.stderr()).join("\n")).toEqual([0, 0]);
      expect(problems).toEqual([]);
      expect([...seen]).toEqual(["gen-1"]);

      const [a, b] = children.map((c) => JSON.parse(c.lines.at(-1)!) as ChildResult);
      expect(b).toEqual(a);
      expect(consistent(a!)).toBe(true);
      // What they read is what stays on disk, and nothing else is left there.
      expect(await readFile(a!.paths.keyFile, "utf8")).toBe(a!.key);
      expect(await readdir(certificateDir(dataDir))).toEqual(["gen-1"]);
    } finally {
      for (const c of children) c.proc.kill("SIGKILL");
    }
  });

  test("two concurrent calls without shared state agree; a later start reads the same set", async () => {
    const dataDir = await fresh();
    const [a, b] = await Promise.all([ensureCertificate(dataDir), ensureCertificate(dataDir)]);
    expect(b).toEqual(a);
    const read = async (p: GeneratedCertificate) => ({
      ca: await readFile(p.caFile, "utf8"),
      cert: await readFile(p.certificateFile, "utf8"),
      key: await readFile(p.keyFile, "utf8"),
    });
    const set = await read(a!);
    expect(consistent(set)).toBe(true);
    expect(await read(await ensureCertificate(dataDir))).toEqual(set);
  });
});

describe("keeping the certificate", () => {
  test("an expiring server certificate is made again with the same CA; older generations are removed", async () => {
    const dataDir = await fresh();
    const first = await ensureCertificate(dataDir);
    const ca = await readFile(first.caFile, "utf8");
    let now = Date.now();
    for (let i = 0; i < 3; i++) {
      now += 340 * DAY; // within 30 days of the server certificate's end (365 days)
      const renewed = await ensureCertificate(dataDir, { now });
      expect(renewed.certificateFile).not.toBe(first.certificateFile);
      expect(await readFile(renewed.caFile, "utf8")).toBe(ca);
      expect(
        consistent({
          ca,
          cert: await readFile(renewed.certificateFile, "utf8"),
          key: await readFile(renewed.keyFile, "utf8"),
        }),
      ).toBe(true);
    }
    // The newest and the one before it (a process may still be reading it).
    expect((await readdir(certificateDir(dataDir))).sort()).toEqual(["gen-3", "gen-4"]);
  });

  test("a new name: a new certificate naming it and the names before, so processes converge", async () => {
    const dataDir = await fresh();
    const a = await ensureCertificate(dataDir, { extraNames: ["kas-a.example.com"] });
    const b = await ensureCertificate(dataDir, { extraNames: ["kas-b.example.com", "10.1.2.3"] });
    expect(b.certificateFile).not.toBe(a.certificateFile);
    const cert = new X509Certificate(await readFile(b.certificateFile));
    for (const host of ["kas-a.example.com", "kas-b.example.com", "localhost"])
      expect(cert.checkHost(host)).toBe(host);
    for (const ip of ["10.1.2.3", "127.0.0.1", "::1"]) expect(cert.checkIP(ip)).toBe(ip);
    // Either process starting again keeps it.
    expect(await ensureCertificate(dataDir, { extraNames: ["kas-a.example.com"] })).toEqual(b);
  });

  test("the files of kas before generations: their CA is kept, so kubeconfigs that trust it keep working", async () => {
    const made = await ensureCertificate(await fresh());
    const dataDir = await fresh();
    const flat = certificateDir(dataDir);
    await mkdir(flat, { recursive: true });
    for (const [from, to] of [
      [made.caFile, "ca.crt"],
      [made.caFile.replace(/ca\.crt$/, "ca.key"), "ca.key"],
      [made.certificateFile, "tls.crt"],
      [made.keyFile, "tls.key"],
    ] as const)
      await cp(from, join(flat, to));
    const adopted = await ensureCertificate(dataDir);
    expect(await readFile(adopted.caFile, "utf8")).toBe(await readFile(made.caFile, "utf8"));
    expect(await readFile(adopted.keyFile, "utf8")).toBe(await readFile(made.keyFile, "utf8"));

    // A damaged generation (by hand) is replaced by the next, never used.
    await writeFile(adopted.keyFile, "not a key");
    const next = await ensureCertificate(dataDir);
    expect(next.keyFile).toMatch(/gen-2/);
    expect(await readFile(next.caFile, "utf8")).toBe(await readFile(made.caFile, "utf8"));
  });
});
