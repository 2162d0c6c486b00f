// `npm run mutation -- <folder> [--mutate <file>]... [--tests <glob>]... [--concurrency N] [--fresh]`:
// StrykerJS on one source folder (or some of its files) with the tests that cover it. Incremental: a re-run tests only the mutants whose code
// or tests changed (reports/mutation/<folder>/incremental.json; --fresh starts over). The report goes
// to reports/mutation/<folder>/ (index.html, mutation.json); the score is printed at the end. Never
// part of `npm test`: a folder takes minutes to an hour on two cores.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { Stryker } from "@stryker-mutator/core";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    mutate: { type: "string", multiple: true },
    tests: { type: "string", multiple: true },
    concurrency: { type: "string" },
    fresh: { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  },
});

if (values.help || positionals.length !== 1) {
  console.log(`usage: npm run mutation -- <folder> [--mutate <file>]... [--tests <glob>]... [--concurrency N] [--fresh]

  <folder>       the source folder to mutate, e.g. lib/tunnel/header
  --mutate       only these files of it (names relative to <folder>, globs allowed); default: all
  --tests        test files to run against it (globs); default: the folder's mirror under test/
                 (lib/tunnel/x -> test/tunnel/x, lib/router -> test/router, tool/x -> test/tool/x,
                 modules/x -> test/modules/x, cmd/kas/x -> test/kas/x, cmd/agentk/x -> test/agentk/x)
  --concurrency  test runner processes (default 1: the suite's own tests use both cores)
  --fresh        ignore the incremental file and test every mutant again`);
  process.exit(positionals.length === 1 || values.help ? 0 : 2);
}

const folder = relative(process.cwd(), resolve(positionals[0]!)).replace(/\/+$/, "");
if (!existsSync(folder)) {
  console.error(`mutation: no folder ${folder}`);
  process.exit(2);
}

/** The test folder that mirrors a source folder, as the tree lays them out. */
export function mirrorTests(source: string): string {
  const rules: [RegExp, string][] = [
    [/^lib\/tunnel(\/|$)/, "test/tunnel$1"],
    [/^lib\/router(\/|$)/, "test/router$1"],
    [/^lib\/jwt(\/|$)/, "test/jwt$1"],
    [/^tool\//, "test/tool/"],
    [/^modules\//, "test/modules/"],
    [/^cmd\/kas(\/|$)/, "test/kas$1"],
    [/^cmd\/agentk(\/|$)/, "test/agentk$1"],
  ];
  for (const [from, to] of rules) if (from.test(source)) return source.replace(from, to);
  throw new Error(`no test folder mirrors ${source}: name the tests with --tests`);
}

const tests = values.tests ?? [`${mirrorTests(folder)}/**/*.test.ts`];
process.env.MUTATION_TESTS = tests.join(",");
// A selection of files keeps its own report and incremental file: a run over other files of the
// folder would otherwise drop its results.
const selection = values.mutate ? `/${values.mutate.join("+").replace(/[^\w.+-]/g, "_")}` : "";
const reportDir = `reports/mutation/${folder.replaceAll("/", "_")}${selection}`;

// The vitest runner reports no test file locations, so StrykerJS cannot see that tests were added and
// would reuse every earlier verdict. Survivors are what new tests aim at: test them again each run
// (a killed mutant's verdict is kept while its code is unchanged).
const incrementalFile = `${reportDir}/incremental.json`;
if (!values.fresh && existsSync(incrementalFile)) {
  const report = JSON.parse(readFileSync(incrementalFile, "utf8")) as {
    files: Record<string, { mutants: { status: string }[] }>;
  };
  for (const file of Object.values(report.files)) {
    file.mutants = file.mutants.filter((m) => m.status !== "Survived" && m.status !== "NoCoverage");
  }
  writeFileSync(incrementalFile, JSON.stringify(report));
}

const result = await new Stryker({
  testRunner: "vitest",
  vitest: { configFile: "vitest.mutation.config.ts", related: false },
  mutate: [...(values.mutate ?? ["**/*.ts"]).map((f) => `${folder}/${f}`), "!**/*.d.ts"],
  coverageAnalysis: "perTest",
  concurrency: Number(values.concurrency ?? 1),
  incremental: true,
  incrementalFile,
  force: values.fresh,
  reporters: ["clear-text", "progress", "json", "html"],
  jsonReporter: { fileName: `${reportDir}/mutation.json` },
  htmlReporter: { fileName: `${reportDir}/index.html` },
  clearTextReporter: { reportTests: false, reportMutants: true, allowEmojis: false },
  tempDirName: ".stryker-tmp",
  cleanTempDir: "always",
  timeoutMS: 10_000,
  plugins: ["@stryker-mutator/vitest-runner"],
}).runMutationTest();

const killed = result.filter((m) => m.status === "Killed" || m.status === "Timeout").length;
const counted = result.filter((m) => !["CompileError", "RuntimeError", "Ignored"].includes(m.status)).length;
const score = counted === 0 ? 100 : (100 * killed) / counted;
console.log(
  `mutation: ${folder}: ${counted} mutants, ${killed} killed or timed out, score ${score.toFixed(2)} %`,
);
console.log(`mutation: report ${reportDir}/index.html`);
