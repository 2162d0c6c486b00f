// The Dockerfile, built by buildah (Debian's, as root, overlay storage, chroot isolation: no daemon, no
// privileges beyond root) into the kas and agentk images, which are then run as an engine would:
// their entrypoint, their user. No container registry is reachable here, so the base image is made
// from this machine's own node (node-base-image.sh) and passed as NODE_IMAGE; the npm registry is
// reachable, and the build installs from it as it would anywhere.
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, test } from "vitest";

const run = promisify(execFile);
const BASE = "localhost/node-base:test";
const IMAGES = { kas: "localhost/kas:test", agentk: "localhost/agentk:test" } as const;

let root: string;
let storage: string[];

const buildah = (args: string[], timeoutMs = 60_000) =>
  run("buildah", [...storage, ...args], { timeout: timeoutMs, killSignal: "SIGKILL", maxBuffer: 64 << 20 });

/** Runs a command in a container of `image` (its user, its working directory). */
async function inImage(image: string, command: string[]) {
  const { stdout: ctr } = await buildah(["from", "--quiet", image]);
  try {
    return await buildah(["run", "--isolation", "chroot", ctr.trim(), "--", ...command]);
  } finally {
    await buildah(["rm", ctr.trim()]);
  }
}

interface ImageConfig {
  Entrypoint?: string[];
  Cmd?: string[];
  User?: string;
  WorkingDir?: string;
  ExposedPorts?: Record<string, object>;
}

async function configOf(image: string): Promise<ImageConfig> {
  const { stdout } = await buildah(["inspect", "--type", "image", image]);
  return (JSON.parse(stdout) as { OCIv1: { config: ImageConfig } }).OCIv1.config;
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "images-"));
  storage = ["--storage-driver", "overlay", "--root", join(root, "root"), "--runroot", join(root, "run")];
  await run("bash", ["test/deploy/node-base-image.sh", BASE, ...storage], { timeout: 60_000 });
  for (const [target, tag] of Object.entries(IMAGES)) {
    // --layers: the second target reuses the stages the first one built.
    await buildah(
      ["bud", "--layers", "--isolation", "chroot", "--build-arg", `NODE_IMAGE=${BASE}`].concat([
        "--target",
        target,
        "--tag",
        tag,
        ".",
      ]),
      240_000,
    );
  }
}, 300_000);
afterAll(async () => {
  if (!root) return;
  await buildah(["rm", "--all"]).catch(() => undefined);
  await rm(root, { recursive: true, force: true });
}, 60_000);

describe.each(Object.entries(IMAGES))("the %s image", (daemon, image) => {
  test("its entrypoint is node on the compiled daemon, in exec form, as a user that is not root", async () => {
    const config = await configOf(image);
    expect(config.Entrypoint).toEqual(["node", `dist/cmd/${daemon}/main.js`]);
    expect(config.Cmd ?? []).toEqual([]);
    expect(config.User).toBe("1000:1000");
    const { stdout } = await inImage(image, ["node", "-p", "process.getuid() + ' ' + process.cwd()"]);
    expect(stdout.trim()).toBe(`1000 ${config.WorkingDir}`);
  });

  test("--help runs from dist/ with the production dependencies", async () => {
    const { Entrypoint } = await configOf(image);
    const { stdout } = await inImage(image, [...Entrypoint!, "--help"]);
    expect(stdout).toMatch(new RegExp(`^Usage: ${daemon} `));
  });

  test("holds production dependencies only, and no TypeScript sources", async () => {
    const check = `const fs = require("node:fs");
      const has = (p) => fs.existsSync(p);
      console.log(JSON.stringify({
        ws: has("node_modules/ws"), grpc: has("node_modules/@grpc/grpc-js"),
        typescript: has("node_modules/typescript"), vitest: has("node_modules/vitest"), biome: has("node_modules/@biomejs"),
        sources: has("cmd") || has("lib") || has("modules"), proto: has("dist/proto/gen"),
        dashboard: has("dist/modules/dashboard/web/app.js") && has("dist/modules/dashboard/web/app.css"),
        esbuild: has("node_modules/esbuild"),
      }))`;
    const { stdout } = await inImage(image, ["node", "-e", check]);
    expect(JSON.parse(stdout)).toEqual({
      ws: true,
      grpc: true,
      typescript: false,
      vitest: false,
      biome: false,
      sources: false,
      proto: true,
      dashboard: true,
      esbuild: false,
    });
  });
});

test("the images expose the ports the manifests name", async () => {
  expect(Object.keys((await configOf(IMAGES.agentk)).ExposedPorts ?? {})).toEqual(["8080/tcp"]);
  expect(Object.keys((await configOf(IMAGES.kas)).ExposedPorts ?? {}).sort()).toEqual(
    ["8150/tcp", "8151/tcp", "8153/tcp", "8154/tcp", "8155/tcp"].sort(),
  );
});
