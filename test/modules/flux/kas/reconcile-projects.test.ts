// ReconcileProjects' request checks (GitLab's validation: a full path per project), the push fan-out,
// and what one stream counts for GitLab's usage metrics.
import fc from "fast-check";
import { Registry } from "prom-client";
import { describe, expect, test } from "vitest";
import { createFluxKasMetrics } from "../../../../modules/flux/kas/metrics.ts";
import { PushFanout } from "../../../../modules/flux/kas/pushes.ts";
import {
  MAX_PROJECT_PATH,
  MAX_PROJECTS,
  ProjectStream,
  requestedProjects,
} from "../../../../modules/flux/kas/reconcile-projects.ts";
import { ProjectAccessError, UsageTracker } from "../../../../modules/runtime/index.ts";
import { createLogger } from "../../../../tool/observability/index.ts";

const request = (...ids: string[]) => ({ project: ids.map((id) => ({ id })) });

describe("requestedProjects", () => {
  test("the paths, once each", () => {
    expect(requestedProjects(request("a/b", "c/d", "a/b"))).toEqual(new Set(["a/b", "c/d"]));
    expect(requestedProjects(request())).toEqual(new Set());
  });

  test("an empty path, a path too long, or too many projects: refused, naming which", () => {
    expect(requestedProjects(request("a/b", ""))).toBe("project[1].id: a full project path is required");
    expect(requestedProjects(request("x".repeat(MAX_PROJECT_PATH + 1)))).toMatch(
      /^project\[0\]\.id: at most/,
    );
    expect(requestedProjects(request(...Array.from({ length: MAX_PROJECTS + 1 }, (_, i) => `g/${i}`)))).toBe(
      `at most ${MAX_PROJECTS} projects`,
    );
  });

  test("property: any request is a set of non-empty bounded paths or a reason", () => {
    fc.assert(
      fc.property(fc.array(fc.string({ maxLength: 1100 }), { maxLength: 50 }), (ids) => {
        const out = requestedProjects(request(...ids));
        if (typeof out === "string") expect(out).not.toBe("");
        else for (const p of out) expect(p.length > 0 && p.length <= MAX_PROJECT_PATH).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});

describe("PushFanout", () => {
  test("a push reaches the streams that follow its full path, and only while they follow it", () => {
    const fanout = new PushFanout();
    const a: string[] = [];
    const b: string[] = [];
    const stopA = fanout.follow(["g/p", "g/q"], (p) => a.push(p.fullPath));
    fanout.follow(["g/q"], (p) => b.push(p.fullPath));
    expect(fanout.pushed({ fullPath: "g/q", id: "7" })).toBe(2);
    expect(fanout.pushed({ fullPath: "g/p" })).toBe(1);
    expect(fanout.pushed({ fullPath: "g/r" })).toBe(0);
    // GitLab's streams match full paths: a push named by id only reaches nobody.
    expect(fanout.pushed({ id: "7" })).toBe(0);
    stopA();
    expect(fanout.pushed({ fullPath: "g/p" })).toBe(0);
    fanout.pushed({ fullPath: "g/q" });
    expect(a).toEqual(["g/q", "g/p"]);
    expect(b).toEqual(["g/q", "g/q"]);
  });
});

describe("ProjectStream", () => {
  test("each push sent to the agent counts for GitLab's usage metrics, with its project id; a refused one does not", async () => {
    const usage = new UsageTracker();
    const sent: string[] = [];
    let done: () => void = () => {};
    const allSent = new Promise<void>((resolve) => {
      done = resolve;
    });
    const stream = new ProjectStream(
      { agentId: "42", projectId: "7" } as never,
      {
        projects: {
          repositoryFor: async (_agent: unknown, path: string) => {
            if (path === "g/secret") throw new ProjectAccessError("forbidden", "no access");
            return {} as never;
          },
        } as never,
        metrics: createFluxKasMetrics(new Registry()),
        usage: {
          notified: usage.counter("flux_git_push_notifications_total"),
          projects: usage.uniqueCounter("flux_git_push_notified_unique_projects"),
        },
        log: createLogger({ level: "silent" }),
      },
      (r) => {
        sent.push(r.project!.id);
        if (sent.length === 3) done();
      },
    );
    stream.pushed({ fullPath: "g/p", id: "11" });
    stream.pushed({ fullPath: "g/secret", id: "12" });
    stream.pushed({ fullPath: "g/q" });
    stream.pushed({ fullPath: "g/p", id: "11" });
    await allSent;
    expect(sent).toEqual(["g/p", "g/q", "g/p"]);
    expect(usage.collect()).toEqual({
      counters: { flux_git_push_notifications_total: 3 },
      uniqueCounters: { flux_git_push_notified_unique_projects: ["11"] },
    });
  });
});
