// The vitest configuration StrykerJS runs (scripts/mutation.ts): the project's own, but only the test
// files that cover the folder being mutated (MUTATION_TESTS, comma-separated globs), so each mutant
// runs against its folder's tests rather than the whole suite.
import { defineConfig } from "vitest/config";
import base from "./vitest.config.ts";

const tests = (process.env.MUTATION_TESTS ?? "").split(",").filter((t) => t !== "");
if (tests.length === 0)
  throw new Error("MUTATION_TESTS names no test files: run `npm run mutation -- <folder>`");

// Replaced, not merged: mergeConfig would append these globs to the suite's own.
export default defineConfig({ ...base, test: { ...base.test, include: tests } });
