// The library as its users get it: `npm pack` of packages/tunnel, installed from the tarball into a
// fresh consumer project, which type-checks strict `nodenext` programs against it with
// `skipLibCheck: false` (so every declaration file it ships is checked, with what it installs and
// nothing from this repository) and runs them. The first program is the README's library example,
// as written there. The npm registry is asked only for what the tarball depends on, from npm's
// cache first (`--prefer-offline`; the repository's own install has cached the same versions).
import { execFile } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, test } from "vitest";

const run = promisify(execFile);
const ROOT = new URL("../..", import.meta.url).pathname;
const TSC = join(ROOT, "node_modules/.bin/tsc");
const EXAMPLE = "examples/library/quickstart.ts";
const EXPECTED_OUTPUT = "agent-1 200 hello from the agent: /hello\n";
/** The bound on what installing the library brings (the package itself included). */
const MAX_PACKAGES = 15;

/** npm run by a test under `npm test` inherits npm_* settings meant for this repository: drop them. */
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));

const sh = (cmd: string, args: string[], cwd: string, timeout = 180_000) =>
  run(cmd, args, { cwd, env, timeout, maxBuffer: 64 << 20 });

interface PackResult {
  filename: string;
  files: Array<{ path: string }>;
}

let dir: string;
let consumer: string;
let packed: PackResult;
let installed: string[];

async function lockedVersion(name: string): Promise<string> {
  const lock = JSON.parse(await readFile(join(ROOT, "package-lock.json"), "utf8")) as {
    packages: Record<string, { version?: string }>;
  };
  return lock.packages[`node_modules/${name}`]!.version!;
}

async function packageJson(): Promise<{ dependencies: Record<string, string> }> {
  return JSON.parse(await readFile(join(ROOT, "packages/tunnel/package.json"), "utf8"));
}

async function npmInstall(...specs: string[]): Promise<void> {
  await sh("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", ...specs], consumer);
}

/** Type-checks `files` strictly, emitting them to out/ beside the consumer's sources. */
async function typeCheck(files: string[]): Promise<void> {
  const tsconfig = {
    compilerOptions: {
      target: "ES2022",
      lib: ["ES2023"],
      module: "NodeNext",
      moduleResolution: "NodeNext",
      strict: true,
      exactOptionalPropertyTypes: true,
      noUncheckedIndexedAccess: true,
      skipLibCheck: false,
      rootDir: "src",
      outDir: "out",
    },
    files: files.map((f) => `src/${f}`),
  };
  await writeFile(join(consumer, "tsconfig.json"), JSON.stringify(tsconfig, null, 2));
  await sh(TSC, ["-p", "tsconfig.json"], consumer).catch((err: { stdout?: string }) => {
    throw new Error(`tsc failed in the consumer:\n${err.stdout ?? err}`);
  });
}

async function runNode(file: string): Promise<string> {
  const { stdout } = await sh(process.execPath, [file], consumer, 30_000);
  return stdout;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "library-package-"));
  // `npm pack` runs the package's prepack: a fresh build into packages/tunnel/dist.
  const { stdout } = await sh(
    "npm",
    ["pack", "-w", "gitlab-agent-tunnel", "--pack-destination", dir, "--json", "--loglevel=error"],
    ROOT,
  );
  packed = (JSON.parse(stdout) as PackResult[])[0]!;
  consumer = join(dir, "consumer");
  await mkdir(join(consumer, "src"), { recursive: true });
  await writeFile(
    join(consumer, "package.json"),
    JSON.stringify({ name: "consumer", version: "1.0.0", private: true, type: "module" }),
  );
  // The example uses undici's request() with the package's TunnelDispatcher, so it depends on undici
  // itself, in the range the package does (one copy for both).
  const { dependencies } = await packageJson();
  await npmInstall(join(dir, packed.filename), `undici@${dependencies.undici}`);
  const lock = JSON.parse(await readFile(join(consumer, "node_modules/.package-lock.json"), "utf8")) as {
    packages: Record<string, unknown>;
  };
  installed = Object.keys(lock.packages)
    .filter((p) => p.startsWith("node_modules/"))
    .map((p) => p.slice("node_modules/".length));
}, 300_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("the packed library", () => {
  test(`installs with at most ${MAX_PACKAGES} packages, none of the daemons' dependencies`, () => {
    expect(installed).toContain("gitlab-agent-tunnel");
    expect(installed.length, installed.join(", ")).toBeLessThanOrEqual(MAX_PACKAGES);
    for (const daemonsOnly of ["@kubernetes/client-node", "pino", "zod", "@grpc/grpc-js", "ioredis"]) {
      expect(installed).not.toContain(daemonsOnly);
    }
  });

  test("ships its LICENSE, README, API reference and JavaScript with declarations: no sources, no source maps", async () => {
    const paths = packed.files.map((f) => f.path);
    expect(paths).toEqual(expect.arrayContaining(["LICENSE", "README.md", "package.json", "api/README.md"]));
    expect(paths.filter((p) => p.endsWith(".map"))).toEqual([]);
    expect(paths.filter((p) => p.endsWith(".ts") && !p.endsWith(".d.ts"))).toEqual([]);
    const js = paths.filter((p) => p.endsWith(".js"));
    expect(js.length).toBeGreaterThan(0);
    for (const file of js) {
      expect(paths, `${file} has no declarations`).toContain(file.replace(/\.js$/, ".d.ts"));
      const text = await readFile(join(consumer, "node_modules/gitlab-agent-tunnel", file), "utf8");
      expect(text, file).not.toMatch(/sourceMappingURL/);
    }
    expect(await readFile(join(ROOT, "packages/tunnel/LICENSE"), "utf8")).toBe(
      await readFile(join(ROOT, "LICENSE"), "utf8"),
    );
  });

  test("the README's library example type-checks strictly against it, with no more installed, and runs", async () => {
    await copyFile(join(ROOT, EXAMPLE), join(consumer, "src/quickstart.ts"));
    await typeCheck(["quickstart.ts"]);
    expect(await runNode("out/quickstart.js")).toBe(EXPECTED_OUTPUT);
  });

  test("with its peer dependencies installed: the router and gRPC entries, and require() from CommonJS", async () => {
    await npmInstall(
      `ioredis@${await lockedVersion("ioredis")}`,
      `@grpc/grpc-js@${await lockedVersion("@grpc/grpc-js")}`,
    );
    for (const f of ["peers.ts", "require.cts"]) {
      await copyFile(join(ROOT, "test/package/consumer", f), join(consumer, "src", f));
    }
    await typeCheck(["peers.ts", "require.cts"]);
    expect(await runNode("out/peers.js")).toBe(
      "router: ping; agent 7: NO_TUNNEL\ngrpc: stream server closed\n",
    );
    expect(await runNode("out/require.cjs")).toBe("require: function function KIND_HTTP\n");
  }, 240_000);
});

describe("its documentation", () => {
  test("the README's library example is examples/library/quickstart.ts verbatim, with its output", async () => {
    const example = await readFile(join(ROOT, EXAMPLE), "utf8");
    for (const readme of ["README.md", "packages/tunnel/README.md"]) {
      const text = await readFile(join(ROOT, readme), "utf8");
      expect(text, readme).toContain(`\`\`\`ts\n${example}\`\`\``);
      expect(text, readme).toContain(EXPECTED_OUTPUT.trim());
    }
  });

  test("the committed API reference (packages/tunnel/api) is what `npm run docs:api` generates", async () => {
    const out = join(dir, "api");
    await sh(
      join(ROOT, "node_modules/.bin/typedoc"),
      ["--options", "packages/tunnel/typedoc.json", "--out", out, "--logLevel", "Error"],
      ROOT,
    );
    const committed = join(ROOT, "packages/tunnel/api");
    const list = async (base: string) =>
      (await readdir(base, { recursive: true, withFileTypes: true }))
        .filter((e) => e.isFile())
        .map((e) => join(e.parentPath, e.name).slice(base.length))
        .sort();
    const files = await list(out);
    expect(await list(committed), "run `npm run docs:api` and commit packages/tunnel/api").toEqual(files);
    for (const f of files) {
      expect(await readFile(join(committed, f), "utf8"), `${f}: run \`npm run docs:api\``).toBe(
        await readFile(join(out, f), "utf8"),
      );
    }
  }, 180_000);
});
