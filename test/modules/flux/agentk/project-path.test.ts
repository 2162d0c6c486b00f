// GitRepository URL -> GitLab project path, as GitLab's agent reads it (getProjectPathFromRepositoryUrl
// and the host check of its GitRepository controller).
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { gitlabHost, gitlabProjectPath } from "../../../../modules/flux/agentk/project-path.ts";

const HOST = "gitlab.example.com";
const segment = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,20}$/).filter((s) => !s.endsWith(".git"));
const projectPath = fc.array(segment, { minLength: 1, maxLength: 5 }).map((s) => s.join("/"));

describe("gitlabProjectPath", () => {
  test.each([
    ["https://gitlab.example.com/group/app.git", "group/app"],
    ["https://gitlab.example.com/group/sub/app", "group/sub/app"],
    ["http://gitlab.example.com:8080/group/app.git", "group/app"],
    ["ssh://git@gitlab.example.com/group/app.git", "group/app"],
    ["ssh://git@gitlab.example.com:2222/group/app", "group/app"],
    ["https://GitLab.Example.com/group/app.git", "group/app"],
    ["https://gitlab.example.com//group/app.git", "group/app"],
    ["https://gitlab.example.com/group/my%20app.git", "group/my app"],
  ])("%s -> %s", (url, path) => {
    expect(gitlabProjectPath(url, HOST)).toBe(path);
  });

  test.each([
    ["another host", "https://github.com/group/app.git"],
    ["a subdomain of GitLab's host", "https://mirror.gitlab.example.com/group/app.git"],
    ["no path", "https://gitlab.example.com/"],
    ["only .git", "https://gitlab.example.com/.git"],
    ["the SCP-like form (Flux refuses it)", "git@gitlab.example.com:group/app.git"],
    ["not a URL", "group/app"],
    ["a malformed escape", "https://gitlab.example.com/group/%E0%A4%A.git"],
  ])("none for %s", (_, url) => {
    expect(gitlabProjectPath(url, HOST)).toBeUndefined();
  });

  test("property: every scheme Flux takes, with or without .git, gives the path back; another host gives none", () => {
    fc.assert(
      fc.property(
        projectPath,
        fc.constantFrom("https://", "http://", "ssh://git@"),
        fc.boolean(),
        (path, scheme, dotGit) => {
          const url = `${scheme}${HOST}/${path}${dotGit ? ".git" : ""}`;
          expect(gitlabProjectPath(url, HOST)).toBe(path);
          expect(gitlabProjectPath(url, "gitlab.other.example")).toBeUndefined();
        },
      ),
      { numRuns: 500 },
    );
  });

  test("property: any text is a path or none, never a throw, and a path is never empty nor starts with /", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.webUrl({ size: "xsmall" }),
          fc.string().map((s) => `https://${HOST}/${s}`),
        ),
        (url) => {
          const path = gitlabProjectPath(url, HOST);
          if (path !== undefined) {
            expect(path).not.toBe("");
            expect(path.startsWith("/")).toBe(false);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("gitlabHost", () => {
  test("the external URL's host name, lower case; none for nothing or a non-URL", () => {
    expect(gitlabHost("https://GitLab.example.com:8443/gitlab")).toBe("gitlab.example.com");
    expect(gitlabHost("")).toBeUndefined();
    expect(gitlabHost("not a url")).toBeUndefined();
  });
});
