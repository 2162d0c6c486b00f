// kas's User-Agent toward GitLab, in GitLab's kas's form gitlab-kas/<version>/<commit>: the version
// from package.json, the commit from the image's GITLAB_AGENT_COMMIT (unknown when run from source).
import { readFileSync } from "node:fs";
import { afterEach, expect, test, vi } from "vitest";

const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
  version: string;
};

afterEach(() => {
  vi.unstubAllEnvs();
  vi.resetModules();
});

test("gitlab-kas/<version>/<commit>, the commit from GITLAB_AGENT_COMMIT", async () => {
  vi.stubEnv("GITLAB_AGENT_COMMIT", "0a4bdc9d");
  vi.resetModules();
  const { KAS_USER_AGENT, COMMIT, VERSION } = await import("../../tool/version.ts");
  expect(VERSION).toBe(pkg.version);
  expect(COMMIT).toBe("0a4bdc9d");
  expect(KAS_USER_AGENT).toBe(`gitlab-kas/${pkg.version}/0a4bdc9d`);
});

test("without a commit: unknown", async () => {
  vi.stubEnv("GITLAB_AGENT_COMMIT", "");
  vi.resetModules();
  const { KAS_USER_AGENT } = await import("../../tool/version.ts");
  expect(KAS_USER_AGENT).toBe(`gitlab-kas/${pkg.version}/unknown`);
});
