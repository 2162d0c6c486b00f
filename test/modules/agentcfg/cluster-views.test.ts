// The `cluster_views` section: absent is off; written (even empty) is on with every view and
// namespace; bad names, duplicates and too many namespaces are refused with their YAML path; any
// valid section survives file -> wire -> agent side unchanged.
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { stringify } from "yaml";
import {
  AgentConfigurationError,
  CLUSTER_VIEW_NAMES,
  deserializeAgentConfiguration,
  MAX_CLUSTER_VIEWS_NAMESPACES,
  parseAgentConfiguration,
  serializeAgentConfiguration,
} from "../../../modules/agentcfg/index.ts";

const issuesOf = (text: string) => {
  try {
    parseAgentConfiguration(text);
  } catch (e) {
    if (e instanceof AgentConfigurationError) return e.issues.map((i) => `${i.path}: ${i.message}`);
    throw e;
  }
  return [];
};

describe("cluster_views", () => {
  test("absent: off; empty: on with every view and namespace", () => {
    expect(parseAgentConfiguration("").cluster_views).toBeUndefined();
    expect(parseAgentConfiguration("cluster_views: {}\n").cluster_views).toEqual({
      enabled: true,
      views: ["nodes", "pods", "workloads", "warnings"],
      namespaces: [],
    });
    expect(
      parseAgentConfiguration("cluster_views:\n  enabled: false\n  views: [pods]\n  namespaces: [a, b-2]\n")
        .cluster_views,
    ).toEqual({ enabled: false, views: ["pods"], namespaces: ["a", "b-2"] });
  });

  test("refusals name the setting", () => {
    expect(issuesOf("cluster_views: {views: [nodes, nodes]}\n")).toEqual([
      expect.stringMatching(/^cluster_views\.views: each view at most once/),
    ]);
    expect(issuesOf("cluster_views: {views: [secrets]}\n")[0]).toMatch(/^cluster_views\.views\[0\]: /);
    expect(issuesOf("cluster_views: {views: []}\n")[0]).toMatch(/^cluster_views\.views: /);
    expect(issuesOf("cluster_views: {namespaces: [Default]}\n")[0]).toMatch(
      /^cluster_views\.namespaces\[0\]: must be a namespace name/,
    );
    const many = Array.from({ length: MAX_CLUSTER_VIEWS_NAMESPACES + 1 }, (_, i) => `ns${i}`);
    expect(issuesOf(stringify({ cluster_views: { namespaces: many } }))[0]).toMatch(
      /^cluster_views\.namespaces: /,
    );
    expect(issuesOf("cluster_views: {colour: blue}\n")[0]).toMatch(/^cluster_views\.colour: unknown key/);
  });

  test("property: any section parses cleanly or is refused with issues; valid ones survive the wire", () => {
    const label = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?$/);
    const anyName = fc.oneof(label, fc.string({ maxLength: 12 }));
    const section = fc.record(
      {
        enabled: fc.oneof(fc.boolean(), fc.string({ maxLength: 3 })),
        views: fc.array(fc.oneof(fc.constantFrom(...CLUSTER_VIEW_NAMES), fc.string({ maxLength: 8 })), {
          maxLength: 6,
        }),
        namespaces: fc.array(anyName, { maxLength: 60 }),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(section, (s) => {
        const text = stringify({ cluster_views: s });
        let parsed: ReturnType<typeof parseAgentConfiguration>;
        try {
          parsed = parseAgentConfiguration(text);
        } catch (e) {
          expect(e).toBeInstanceOf(AgentConfigurationError);
          expect((e as AgentConfigurationError).issues[0]?.path).toMatch(/^cluster_views/);
          return;
        }
        const cv = parsed.cluster_views!;
        expect(new Set(cv.views).size).toBe(cv.views.length);
        expect(cv.namespaces.length).toBeLessThanOrEqual(MAX_CLUSTER_VIEWS_NAMESPACES);
        expect(deserializeAgentConfiguration(serializeAgentConfiguration(parsed)).cluster_views).toEqual(cv);
      }),
      { numRuns: 300 },
    );
  });
});
