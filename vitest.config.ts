import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 30_000,
    // Heavy stream tests share two cores; run files in parallel, but not too many.
    maxWorkers: 2,
  },
});
