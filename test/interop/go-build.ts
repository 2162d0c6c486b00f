import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";

// Builds the Go reference peer (test/interop/go) from the test itself, offline: the reference
// yamux comes from Debian's golang-github-hashicorp-yamux-dev through a `replace` in go.mod, and
// GOPROXY=off makes any attempt to reach the network a build error instead of a hang.

const GO_DIR = fileURLToPath(new URL("./go/", import.meta.url));
const BIN_DIR = join(GO_DIR, "bin");
export const GO_PEER_BINARY = join(BIN_DIR, "yamuxpeer");
const STAMP = `${GO_PEER_BINARY}.sha256`;
const LOCK = join(BIN_DIR, ".build.lock");
const BUILD_TIMEOUT_MS = 180_000;
const STALE_LOCK_MS = 5 * 60_000;

const GO_ENV = {
  GOPROXY: "off",
  GOFLAGS: "-mod=mod",
  GO111MODULE: "on",
  GOTOOLCHAIN: "local",
  GOSUMDB: "off",
  GOTELEMETRY: "off",
  GOCACHE: join(tmpdir(), "yamux-interop-go", "cache"),
  GOPATH: join(tmpdir(), "yamux-interop-go", "gopath"),
  CGO_ENABLED: "0",
};

let built: Promise<string> | undefined;

/** Path of an up-to-date peer binary; builds it at most once per process (and once across workers). */
export function buildGoPeer(): Promise<string> {
  built ??= build();
  return built;
}

function go(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      "go",
      args,
      { cwd: GO_DIR, env: { ...process.env, ...GO_ENV }, timeout: BUILD_TIMEOUT_MS },
      (err, stdout, stderr) => {
        if (!err) return resolve(stdout.trim());
        if ((err as NodeJS.ErrnoException).code === "ENOENT") {
          return reject(
            new Error(
              "interop tests need Go and the reference yamux: apt-get install golang-go " +
                "golang-github-hashicorp-yamux-dev (both listed in .ci/apt-packages)",
            ),
          );
        }
        reject(new Error(`go ${args.join(" ")} failed: ${err.message}\n${stderr}`));
      },
    );
  });
}

/** Changes to the Go sources or the toolchain rebuild the binary; anything else reuses it. */
async function sourceStamp(): Promise<string> {
  const h = createHash("sha256").update(await go(["version"]));
  const files = (await readdir(GO_DIR)).filter((f) => f.endsWith(".go") || f === "go.mod").sort();
  for (const f of files) h.update(f).update(await readFile(join(GO_DIR, f)));
  return h.digest("hex");
}

async function upToDate(stamp: string): Promise<boolean> {
  return existsSync(GO_PEER_BINARY) && (await readFile(STAMP, "utf8").catch(() => "")) === stamp;
}

async function build(): Promise<string> {
  await mkdir(BIN_DIR, { recursive: true });
  const stamp = await sourceStamp();
  if (await upToDate(stamp)) return GO_PEER_BINARY;
  await lock();
  try {
    if (await upToDate(stamp)) return GO_PEER_BINARY; // another worker built it meanwhile
    const tmp = `${GO_PEER_BINARY}.${process.pid}.tmp`;
    await go(["build", "-trimpath", "-o", tmp, "."]);
    await rename(tmp, GO_PEER_BINARY);
    await writeFile(STAMP, stamp);
    return GO_PEER_BINARY;
  } finally {
    await rm(LOCK, { recursive: true, force: true });
  }
}

/** Test files run in parallel workers; one builds while the others wait for it. */
async function lock(): Promise<void> {
  const deadline = Date.now() + BUILD_TIMEOUT_MS;
  for (;;) {
    try {
      await mkdir(LOCK);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    const age = await stat(LOCK).then(
      (s) => Date.now() - s.mtimeMs,
      () => 0,
    );
    if (age > STALE_LOCK_MS) await rm(LOCK, { recursive: true, force: true });
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for another build of the Go peer (${LOCK})`);
    await delay(200);
  }
}
