// kas -> agentk: the validated configuration as JSON, re-validated on the agent side, where keys
// from a newer kas are dropped instead of refused.
import { describe, expect, test } from "vitest";
import {
  AgentConfigurationError,
  agentConfigurationSchema,
  deserializeAgentConfiguration,
  parseAgentConfiguration,
  serializeAgentConfiguration,
} from "../../../modules/agentcfg/index.ts";

// The JSON as the agent receives it, to tamper with.
// biome-ignore lint/suspicious/noExplicitAny: free-form test data
type Wire = Record<string, any>;

const TEXT = `gitops:
  manifest_projects:
  - id: group/project
    prune_timeout: 90s
    ref: {tag: v1.2.3}
ci_access:
  instance:
    access_as: {ci_user: {}}
user_access:
  access_as: {user: {}}
  groups: [{id: g}]
observability:
  logging: {level: warn, grpc_level: info}
`;

describe("wire form", () => {
  test("round trip: what kas validated is what agentk gets", () => {
    const config = parseAgentConfiguration(TEXT);
    const json = serializeAgentConfiguration(config);
    expect(JSON.parse(json).gitops.manifest_projects[0].prune_timeout).toBe(90_000);
    expect(deserializeAgentConfiguration(json)).toEqual(config);
  });

  test("the agent drops keys it does not know, at any depth", () => {
    const wire = JSON.parse(serializeAgentConfiguration(parseAgentConfiguration(TEXT)));
    wire.some_future_feature = { enabled: true };
    wire.gitops.manifest_projects[0].server_side_apply = true;
    wire.ci_access.instance.access_as.ci_user.scopes = ["a"];
    wire.observability.logging.format = "json";
    const got = deserializeAgentConfiguration(JSON.stringify(wire));
    expect(got).toEqual(parseAgentConfiguration(TEXT));
    expect(got).not.toHaveProperty("some_future_feature");
    expect(got.gitops!.manifest_projects[0]).not.toHaveProperty("server_side_apply");
  });

  test("kas itself refuses the same unknown key in the file", () => {
    const wire = JSON.parse(serializeAgentConfiguration(parseAgentConfiguration(TEXT)));
    wire.some_future_feature = {};
    expect(agentConfigurationSchema.safeParse(wire).success).toBe(false);
  });

  test("the agent still validates what it knows: types, enums, durations as milliseconds", () => {
    const refused = (mutate: (wire: Wire) => void): string[] => {
      const wire = JSON.parse(serializeAgentConfiguration(parseAgentConfiguration(TEXT)));
      mutate(wire);
      try {
        deserializeAgentConfiguration(JSON.stringify(wire));
      } catch (e) {
        expect(e).toBeInstanceOf(AgentConfigurationError);
        return (e as AgentConfigurationError).issues.map((i) => i.path);
      }
      throw new Error("expected refusal");
    };
    expect(
      refused((w) => {
        w.gitops.manifest_projects[0].prune = "yes";
      }),
    ).toEqual(["gitops.manifest_projects[0].prune"]);
    expect(
      refused((w) => {
        w.observability.logging.level = "trace";
      }),
    ).toEqual(["observability.logging.level"]);
    expect(
      refused((w) => {
        w.gitops.manifest_projects[0].reconcile_timeout = "3600s";
      }),
    ).toEqual(["gitops.manifest_projects[0].reconcile_timeout"]);
    expect(
      refused((w) => {
        w.user_access.access_as = { agent: {}, user: {} };
      }),
    ).toEqual(["user_access.access_as"]);
  });

  test("what kas takes as GitLab does reaches the agent as parsed: negative and sub-millisecond durations, levels by number", () => {
    const parsed = parseAgentConfiguration(
      "gitops:\n  manifest_projects:\n  - id: a\n    reconcile_timeout: -1s\n    prune_timeout: 0.000000001s\n" +
        "observability:\n  logging: {level: 1, grpc_level: 3}\n",
    );
    const agentSide = deserializeAgentConfiguration(serializeAgentConfiguration(parsed));
    expect(agentSide).toEqual(parsed);
    expect(agentSide.gitops!.manifest_projects[0]).toMatchObject({
      reconcile_timeout: -1000,
      prune_timeout: 0.000001,
    });
    expect(agentSide.observability.logging).toEqual({ level: "debug", grpc_level: "error" });
  });

  test("a oneof with only a key this agent does not know is refused, not silently emptied", () => {
    const wire = JSON.parse(serializeAgentConfiguration(parseAgentConfiguration(TEXT)));
    wire.ci_access.instance.access_as = { ci_pipeline: {} };
    expect(() => deserializeAgentConfiguration(JSON.stringify(wire))).toThrow(/exactly one of/);
  });

  test("not JSON", () => {
    expect(() => deserializeAgentConfiguration("{")).toThrow(AgentConfigurationError);
    expect(() => deserializeAgentConfiguration("{")).toThrow(/not JSON/);
  });
});
