// kas's User-Agent toward GitLab, in GitLab's kas's form gitlab-kas/<version>/<commit>, and the
// commit agentk reports: the version from package.json, the commit from the image's
// GITLAB_AGENT_COMMIT, else this checkout's HEAD.
import { execFileSync } from "node:child_process";
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
  const { kasUserAgent, commitId, VERSION } = await import("../../tool/version.ts");
  expect(VERSION).toBe(pkg.version);
  expect(commitId()).toBe("0a4bdc9d");
  expect(kasUserAgent()).toBe(`gitlab-kas/${pkg.version}/0a4bdc9d`);
});

test("a baked commit that is not one is not reported", async () => {
  vi.stubEnv("GITLAB_AGENT_COMMIT", "not a commit");
  vi.resetModules();
  const { kasUserAgent, commitId } = await import("../../tool/version.ts");
  expect(commitId()).toBe("");
  expect(kasUserAgent()).toBe(`gitlab-kas/${pkg.version}/unknown`);
});

test("without one baked in: this checkout's HEAD", async () => {
  vi.stubEnv("GITLAB_AGENT_COMMIT", "");
  vi.resetModules();
  const { kasUserAgent, commitId } = await import("../../tool/version.ts");
  const head = execFileSync("git", ["rev-parse", "HEAD"], { encoding: "utf8" }).trim();
  expect(commitId()).toBe(head);
  expect(kasUserAgent()).toBe(`gitlab-kas/${pkg.version}/${head}`);
});
