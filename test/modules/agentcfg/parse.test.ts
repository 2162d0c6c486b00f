// parseAgentConfiguration on a realistic config.yaml (fields and examples as GitLab documents
// them) and on each kind of bad file: the right path, the right line, nothing else thrown.
import { describe, expect, test } from "vitest";
import {
  type AgentConfiguration,
  AgentConfigurationError,
  type AgentConfigurationIssue,
  EMPTY_AGENT_CONFIGURATION,
  parseAgentConfiguration,
} from "../../../modules/agentcfg/index.ts";

const FULL = `# .gitlab/agents/production/config.yaml
gitops:
  manifest_projects:
  - id: gitlab-org/cluster-integration/gitlab-agent
    default_namespace: my-ns
    paths:
    - glob: '/team1/app1/*.{yaml,yml,json}'
    - glob: '/team2/**/*.yaml'
    reconcile_timeout: 3600s
    dry_run_strategy: none
    prune: true
    prune_timeout: 5400s
    prune_propagation_policy: foreground
    inventory_policy: must_match
    ref:
      branch: production
  - id: group/other
observability:
  logging:
    level: debug
ci_access:
  projects:
  - id: path/to/project
    default_namespace: staging
    environments:
    - production
    - review/*
  - id: path/to/other
    access_as:
      impersonate:
        username: deployer
        groups: [deployers]
        extra:
        - key: team
          val: [a, b]
  groups:
  - id: my-group
    access_as:
      ci_job: {}
    protected_branches_only: true
user_access:
  access_as:
    agent: {}
  projects:
  - id: path/to/project
  groups:
  - id: path/to/group/subgroup
container_scanning:
  cadence: '0 0 * * *'
  vulnerability_report:
    namespaces:
    - default
    - kube-system
  resource_requirements:
    requests:
      cpu: 100m
      memory: 500Mi
    limits:
      cpu: '1'
      memory: 1Gi
remote_development:
  enabled: true
  dns_zone: workspaces.example.dev
  gitlab_workspaces_proxy:
    namespace: gitlab-workspaces
  network_policy:
    enabled: true
    egress:
    - allow: '0.0.0.0/0'
      except:
      - '10.0.0.0/8'
flux:
  webhook_receiver_url: http://webhook-receiver.flux-system.svc.cluster.local
`;

function issuesOf(
  text: string,
  options?: Parameters<typeof parseAgentConfiguration>[1],
): AgentConfigurationIssue[] {
  try {
    parseAgentConfiguration(text, options);
  } catch (e) {
    expect(e).toBeInstanceOf(AgentConfigurationError);
    return [...(e as AgentConfigurationError).issues];
  }
  throw new Error("expected the configuration to be refused");
}

describe("a realistic config.yaml", () => {
  const c: AgentConfiguration = parseAgentConfiguration(FULL);

  test("gitops: values as written, durations in milliseconds", () => {
    const [first, second] = c.gitops!.manifest_projects;
    expect(first).toEqual({
      id: "gitlab-org/cluster-integration/gitlab-agent",
      default_namespace: "my-ns",
      paths: [{ glob: "/team1/app1/*.{yaml,yml,json}" }, { glob: "/team2/**/*.yaml" }],
      reconcile_timeout: 3_600_000,
      dry_run_strategy: "none",
      prune: true,
      prune_timeout: 5_400_000,
      prune_propagation_policy: "foreground",
      inventory_policy: "must_match",
      ref: { branch: "production" },
    });
    // GitLab's defaults for everything left out.
    expect(second).toEqual({
      id: "group/other",
      default_namespace: "default",
      paths: [{ glob: "**/*.{yaml,yml,json}" }],
      reconcile_timeout: 3_600_000,
      dry_run_strategy: "none",
      prune: true,
      prune_timeout: 3_600_000,
      prune_propagation_policy: "foreground",
      inventory_policy: "must_match",
    });
  });

  test("observability: the level given, the gRPC level defaulted", () => {
    expect(c.observability.logging).toEqual({ level: "debug", grpc_level: "error" });
  });

  test("ci_access: access_as defaults to the agent; impersonation and ci_job as written", () => {
    const [p1, p2] = c.ci_access!.projects;
    expect(p1).toEqual({
      id: "path/to/project",
      default_namespace: "staging",
      access_as: { agent: {} },
      environments: ["production", "review/*"],
      protected_branches_only: false,
    });
    expect(p2!.access_as).toEqual({
      impersonate: { username: "deployer", groups: ["deployers"], extra: [{ key: "team", val: ["a", "b"] }] },
    });
    expect(c.ci_access!.groups[0]).toMatchObject({
      id: "my-group",
      access_as: { ci_job: {} },
      protected_branches_only: true,
    });
    expect(c.ci_access!.instance).toBeUndefined();
  });

  test("ci_access.instance: {} authorizes the whole instance with the defaults", () => {
    expect(parseAgentConfiguration("ci_access:\n  instance: {}\n").ci_access).toEqual({
      projects: [],
      groups: [],
      instance: { access_as: { agent: {} }, environments: [], protected_branches_only: false },
    });
  });

  test("user_access, container_scanning, remote_development, flux", () => {
    expect(c.user_access).toEqual({
      access_as: { agent: {} },
      projects: [{ id: "path/to/project" }],
      groups: [{ id: "path/to/group/subgroup" }],
    });
    expect(c.container_scanning!.cadence).toBe("0 0 * * *");
    expect(c.container_scanning!.vulnerability_report!.namespaces).toEqual(["default", "kube-system"]);
    expect(c.container_scanning!.resource_requirements!.limits).toEqual({ cpu: "1", memory: "1Gi" });
    expect(c.remote_development).toMatchObject({
      enabled: true,
      dns_zone: "workspaces.example.dev",
      network_policy: { enabled: true, egress: [{ allow: "0.0.0.0/0", except: ["10.0.0.0/8"] }] },
    });
    expect(c.flux!.webhook_receiver_url).toBe("http://webhook-receiver.flux-system.svc.cluster.local");
  });
});

describe("empty files are the empty configuration", () => {
  test.each([
    ["nothing", ""],
    ["whitespace", "  \n\n"],
    ["comments", "# no agent features yet\n# see the docs\n"],
    ["null", "null\n"],
    ["~", "~"],
    ["an empty document", "---\n"],
  ])("%s", (_, text) => {
    expect(parseAgentConfiguration(text)).toEqual(EMPTY_AGENT_CONFIGURATION);
  });

  test("the empty configuration has no features and logs at info", () => {
    expect(EMPTY_AGENT_CONFIGURATION).toEqual({
      observability: { logging: { level: "info", grpc_level: "error" } },
    });
  });
});

describe("refused files: path and position of the problem", () => {
  test("wrong type deep in an array", () => {
    const text = "gitops:\n  manifest_projects:\n  - id: a\n    paths:\n    - glob: ok\n    - glob: 3\n";
    expect(issuesOf(text)).toEqual([
      {
        path: "gitops.manifest_projects[0].paths[1].glob",
        message: expect.stringMatching(/expected string/),
        line: 6,
        column: 13,
      },
    ]);
  });

  test("unknown key: its own position, the valid siblings untouched", () => {
    const text = "gitops:\n  manifest_projects:\n  - id: a\n    prune: true\n    prnue_timeout: 1h\n";
    expect(issuesOf(text)).toEqual([
      {
        path: "gitops.manifest_projects[0].prnue_timeout",
        message: 'unknown key "prnue_timeout"',
        line: 5,
        column: 5,
      },
    ]);
  });

  test("an explicit tag the text does not fit is refused where it stands, as GitLab's go-yaml refuses it", () => {
    expect(issuesOf("observability:\n  logging:\n    level: !!int debug\n")).toEqual([
      {
        path: "observability.logging.level",
        message: "cannot decode !!str `debug` as a !!int",
        line: 3,
        column: 12,
      },
    ]);
    // In a list: the item whose tag it is, not the one before.
    expect(issuesOf("gitops:\n  manifest_projects:\n  - id: a\n  - !!bool x\n")).toEqual([
      {
        path: "gitops.manifest_projects[1]",
        message: "cannot decode !!str `x` as a !!bool",
        line: 4,
        column: 5,
      },
    ]);
    // One that fits is read as its tag says: !!str keeps a level name GitLab would otherwise read as text anyway.
    expect(
      parseAgentConfiguration("observability:\n  logging:\n    level: !!str warn\n").observability.logging
        .level,
    ).toBe("warn");
  });

  test("unknown top-level section", () => {
    expect(issuesOf("observability: {}\nstarboard: {}\n")).toEqual([
      { path: "starboard", message: 'unknown key "starboard"', line: 2, column: 1 },
    ]);
  });

  test.each([
    ["dry_run_strategy", "maybe", /"maybe": use one of "none", "client", "server"/],
    ["prune_propagation_policy", "later", /"later": use one of "orphan", "background", "foreground"/],
    ["inventory_policy", "take_all", /use one of "must_match", "adopt_if_no_inventory", "adopt_all"/],
  ])("bad enum value for %s", (field, value, expected) => {
    const text = `gitops:\n  manifest_projects:\n  - id: a\n    ${field}: ${value}\n`;
    expect(issuesOf(text)).toEqual([
      {
        path: `gitops.manifest_projects[0].${field}`,
        message: expect.stringMatching(expected),
        line: 4,
        column: 7 + field.length,
      },
    ]);
  });

  test("bad logging level", () => {
    expect(issuesOf("observability:\n  logging:\n    level: verbose\n")).toEqual([
      {
        path: "observability.logging.level",
        message: expect.stringMatching(/info \(0\)/),
        line: 3,
        column: 12,
      },
    ]);
  });

  test("bad duration", () => {
    expect(issuesOf("gitops:\n  manifest_projects:\n  - id: a\n    reconcile_timeout: soon\n")).toEqual([
      {
        path: "gitops.manifest_projects[0].reconcile_timeout",
        message: expect.stringMatching(/invalid duration "soon"/),
        line: 4,
        column: 24,
      },
    ]);
  });

  test("a duration written as a bare number is refused (seconds or milliseconds?)", () => {
    expect(issuesOf("gitops:\n  manifest_projects:\n  - id: a\n    prune_timeout: 3600\n")[0]!.path).toBe(
      "gitops.manifest_projects[0].prune_timeout",
    );
  });

  test("a ref must name exactly one of branch, tag, commit", () => {
    const both = issuesOf(
      "gitops:\n  manifest_projects:\n  - id: a\n    ref:\n      branch: main\n      tag: v1\n",
    );
    expect(both).toEqual([
      {
        path: "gitops.manifest_projects[0].ref",
        message: "only one of tag, branch, commit may be set, found tag, branch",
        line: 5,
        column: 7,
      },
    ]);
    const none = issuesOf("gitops:\n  manifest_projects:\n  - id: a\n    ref: {}\n");
    expect(none[0]).toMatchObject({
      path: "gitops.manifest_projects[0].ref",
      message: /exactly one of tag, branch, commit/,
    });
  });

  test("a missing required field points at its parent", () => {
    expect(issuesOf("gitops:\n  manifest_projects:\n  - default_namespace: x\n")).toEqual([
      {
        path: "gitops.manifest_projects[0].id",
        message: expect.stringMatching(/^required here/),
        line: 3,
        column: 5,
      },
    ]);
    expect(issuesOf("user_access:\n  projects: [{id: a}]\n")[0]).toMatchObject({
      path: "user_access.access_as",
      line: 1,
      column: 1,
    });
  });

  test("every problem is reported, each with its own path", () => {
    const text =
      "ci_access:\n  projects:\n  - id: ''\n    access_as: {agent: {}, ci_user: {}}\n  groups: nope\n";
    expect(issuesOf(text).map((i) => [i.path, i.line])).toEqual([
      ["ci_access.projects[0].id", 3],
      ["ci_access.projects[0].access_as", 4],
      ["ci_access.groups", 5],
    ]);
  });

  test("a key that is not a plain name is quoted in the path", () => {
    expect(issuesOf("gitops:\n  manifest.projects: []\n")).toEqual([
      { path: 'gitops["manifest.projects"]', message: 'unknown key "manifest.projects"', line: 2, column: 3 },
    ]);
  });

  test("a root that is not a map", () => {
    expect(issuesOf("- a\n- b\n")).toEqual([
      { path: "", message: expect.stringMatching(/expected object/), line: 1, column: 1 },
    ]);
  });

  test("YAML syntax errors: line and column", () => {
    expect(issuesOf("observability:\n  logging: level: debug\n")).toEqual([
      {
        path: "observability.logging.level",
        message: "Nested mappings are not allowed in compact mappings",
        line: 2,
        column: 12,
      },
    ]);
    expect(issuesOf("observability:\n\tlogging: {}\n")).toEqual([
      { path: "", message: "Tabs are not allowed as indentation", line: 2, column: 1 },
    ]);
    // An unclosed flow sequence is noticed where the file ends.
    expect(issuesOf("gitops:\n  manifest_projects: [a, b\n")).toEqual([
      { path: "", message: expect.stringMatching(/Flow sequence/), line: 3, column: 1 },
    ]);
  });

  test("duplicate key: its path and the position of the second one", () => {
    const text = "gitops:\n  manifest_projects:\n  - id: a\n    prune: true\n    prune: false\n";
    expect(issuesOf(text)).toEqual([
      {
        path: "gitops.manifest_projects[0].prune",
        message: expect.stringMatching(/unique/),
        line: 5,
        column: 5,
      },
    ]);
  });

  test("several documents in one file", () => {
    expect(issuesOf("observability: {}\n---\ngitops: {}\n")[0]).toMatchObject({
      line: 2,
      message: /multiple documents/,
    });
  });

  test("an alias bomb is refused without expanding it", () => {
    const lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"];
    for (let i = 1; i < 9; i++) {
      const prev = String.fromCharCode(96 + i);
      const name = String.fromCharCode(97 + i);
      lines.push(`${name}: &${name} [${Array(10).fill(`*${prev}`).join(", ")}]`);
    }
    const started = Date.now();
    expect(issuesOf(lines.join("\n"))).toEqual([
      { path: "", message: expect.stringMatching(/aliases expand too much/) },
    ]);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  test("a few aliases, as people use them, are fine", () => {
    const text =
      "ci_access:\n  projects:\n  - id: a\n    environments: &envs [prod, staging]\n  - id: b\n    environments: *envs\n";
    expect(parseAgentConfiguration(text).ci_access!.projects[1]!.environments).toEqual(["prod", "staging"]);
  });

  test("an error through an alias is located where the alias is used", () => {
    const text = "x: &bad 3\ngitops:\n  manifest_projects:\n  - id: *bad\n";
    expect(issuesOf(text)).toEqual([
      {
        path: "gitops.manifest_projects[0].id",
        message: expect.stringMatching(/expected string/),
        line: 4,
        column: 9,
      },
      { path: "x", message: 'unknown key "x"', line: 1, column: 1 },
    ]);
  });

  test("the message names the file and lists every issue with its position", () => {
    try {
      parseAgentConfiguration("observability:\n  logging:\n    levle: debug\n", {
        fileName: ".gitlab/agents/a/config.yaml",
      });
      expect.unreachable();
    } catch (e) {
      expect((e as Error).message).toBe(
        '.gitlab/agents/a/config.yaml: invalid:\n  3:5: observability.logging.levle: unknown key "levle"',
      );
    }
  });

  test("pathological nesting is a refused file, not a crash, and the issue list stays short", () => {
    const issues = issuesOf(`${"[".repeat(60_000)}`);
    expect(issues.length).toBeLessThanOrEqual(21);
  });
});

describe("size limit", () => {
  test("a file over the limit is refused before parsing, naming size and limit", () => {
    // Not even valid YAML: the size check must come first.
    const text = `${"#".repeat(200)}\n: : : [`;
    expect(issuesOf(text, { maxBytes: 100 })).toEqual([
      { path: "", message: `file is ${text.length} bytes, over the limit of 100 bytes` },
    ]);
  });

  test("the default limit is 128 KiB, counted in bytes not characters", () => {
    const comment = `# ${"é".repeat(40_000)}\n`; // 80 004 bytes, 40 003 characters
    expect(parseAgentConfiguration(comment)).toEqual(EMPTY_AGENT_CONFIGURATION);
    const big = comment + comment;
    expect(issuesOf(big)[0]!.message).toBe(
      `file is ${Buffer.byteLength(big)} bytes, over the limit of 131072 bytes`,
    );
    expect(parseAgentConfiguration(big, { maxBytes: 200_000 })).toEqual(EMPTY_AGENT_CONFIGURATION);
  });
});
