// GetObjectsToSynchronize and ReportSync from the agent's side, over a real agent tunnel to an
// in-process kas reading real local git repositories (the static tokens file's manifest_projects):
// a commit as header, objects, trailer; big files in chunks; globs; the next commit after a push;
// nothing re-sent for the commit the agent has; every limit and refusal with its status and a
// readable message, shown on GitLab's API; a sync report shown on the API and counted.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { GitopsServiceClient } from "../../../../proto/gen/gitops/v1/gitops.ts";
import { OTHER_TOKEN, TOKEN } from "../../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../../kas/support/in-process.ts";
import type { InProcessAgentk } from "../../../support/agentk-in-process.ts";
import { GitRepo } from "../../../support/git-repo.ts";
import { until } from "../../../support/until.ts";
import { kasApi, metricsOf, metricValue, pushTo } from "../../agent_configuration/helpers.ts";
import {
  agentWithRawClient,
  openStream,
  reportSync,
  request,
  type Stream,
  texts,
  tokenLine,
} from "./helpers.ts";

const MiB = 1024 * 1024;

interface GitopsShown {
  agent_id: string;
  manifest_projects: Array<{
    project: string;
    last_sent: { commitId: string; files: number; bytes: number } | null;
    last_sync: {
      commitId: string;
      durationMs: number;
      mode: string;
      counts: Record<string, number>;
      objects: unknown[];
    } | null;
    last_error: { source: string; kind: string; code?: string; message: string } | null;
  }>;
}

async function shownGitops(kas: InProcessKas, agentId: number): Promise<GitopsShown> {
  const res = await kasApi(kas, `/api/v1/agents/${agentId}/gitops`);
  expect(res.status).toBe(200);
  return (await res.json()) as GitopsShown;
}

async function ended(stream: Stream, what: string): Promise<grpc.StatusObject> {
  await until(() => stream.status !== undefined, 10_000, what);
  return stream.status!;
}

describe("GitopsService over an agent's tunnel, local manifest projects", () => {
  let dir: string;
  let manifests: GitRepo;
  let limits: GitRepo;
  let other: GitRepo;
  let first: string;
  let kas: InProcessKas;
  let agent: InProcessAgentk;
  let client: GitopsServiceClient;
  const big = randomBytes(2 * MiB + 12_345);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "gitops-kas-"));
    manifests = await GitRepo.init();
    limits = await GitRepo.init();
    other = await GitRepo.init();
    first = await manifests.commit({
      "root.yaml": "kind: Root\n",
      "manifests/a.yaml": "kind: A\n",
      "manifests/sub/deeper/b.yaml": "kind: B\n",
      "manifests/c.json": "{}\n",
      "manifests/.hidden.yaml": "kind: Hidden\n",
      ".gitlab/agents/prod/config.yaml": "gitops: {}\n",
      "manifests/.dot/d.yaml": "kind: Dot\n",
      "README.md": "# not a manifest\n",
      "big/blob.bin": big,
    });
    const many: Record<string, string> = {};
    for (let i = 0; i < 6; i++) many[`many/m${i}.yaml`] = `kind: M${i}\n`;
    await limits.commit({
      ...many,
      // Each under the file limit (3 MiB), together over the total (4 MiB).
      "total/t1.yaml": Buffer.alloc(1.5 * MiB, "a"),
      "total/t2.yaml": Buffer.alloc(1.5 * MiB, "b"),
      "total/t3.yaml": Buffer.alloc(1.5 * MiB, "c"),
      "huge/h.yaml": Buffer.alloc(3 * MiB + 1, "h"),
    });
    await other.commit({ "secret.yaml": "kind: Secret\n" });
    const tokensFile = join(dir, "tokens.yaml");
    await writeFile(
      tokensFile,
      [
        tokenLine(TOKEN, {
          agentId: 42,
          projectId: 7,
          agentName: "prod",
          manifests: { "group/manifests": manifests.path, "group/limits": limits.path },
        }),
        tokenLine(OTHER_TOKEN, {
          agentId: 43,
          projectId: 8,
          agentName: "staging",
          manifests: { "group/other": other.path },
        }),
      ].join("\n"),
    );
    kas = await startInProcessKas((c) => {
      c.agent.staticTokensFile = tokensFile;
      c.agent.gitops.pollPeriodMs = 3_600_000; // only pushes poll
      c.agent.gitops.maxManifestFileSize = 3 * MiB;
      c.agent.gitops.maxTotalManifestFileSize = 4 * MiB;
      c.agent.gitops.maxNumberOfFiles = 5;
      c.agent.gitops.maxNumberOfPaths = 3;
    });
    ({ agent, client } = await agentWithRawClient(kas.addresses.agent, TOKEN));
  });
  afterAll(async () => {
    client?.close();
    await agent?.stop();
    await kas?.close();
    await Promise.all([manifests?.remove(), limits?.remove(), other?.remove()]);
    await rm(dir, { recursive: true, force: true });
  });

  test("a commit: header (commit, project id), the matching files as objects, trailer; hidden files never", async () => {
    const stream = openStream(client, request("group/manifests", ["manifests/**/*.yaml", "*.yaml"]));
    try {
      await until(() => stream.commits().length > 0, 10_000, "a commit");
      const [commit] = stream.commits();
      expect(commit!.commitId).toBe(first);
      expect(commit!.projectId).toBe("0"); // a local repository: GitLab's id unknown
      expect(stream.messages[0]!.header?.agentId).toBe("42"); // the tunnel's agent
      expect(stream.messages.at(-1)!.trailer).toBeDefined();
      expect(texts(commit!)).toEqual({
        "root.yaml": "kind: Root\n",
        "manifests/a.yaml": "kind: A\n",
        "manifests/sub/deeper/b.yaml": "kind: B\n",
      });
      expect(stream.status).toBeUndefined(); // still open, waiting for the next commit
    } finally {
      stream.cancel();
    }
  });

  test("globs: ** crosses directories, * does not, braces, a leading / anchors at the root; dot-directories and dot-files are skipped", async () => {
    const cases: Array<[string[], string[]]> = [
      [["*.yaml"], ["root.yaml"]],
      [["manifests/*.{yaml,json}"], ["manifests/a.yaml", "manifests/c.json"]],
      [["**/*.yaml"], ["manifests/a.yaml", "manifests/sub/deeper/b.yaml", "root.yaml"]],
      // GitLab's documentation writes globs from the root: `/**/*.{yaml,yml,json}`.
      [
        ["/**/*.{yaml,json}"],
        ["manifests/a.yaml", "manifests/c.json", "manifests/sub/deeper/b.yaml", "root.yaml"],
      ],
      [["manifests/**"], ["manifests/a.yaml", "manifests/c.json", "manifests/sub/deeper/b.yaml"]],
      [[".gitlab/**/*.yaml", "manifests/.dot/*.yaml"], []],
    ];
    for (const [globs, expected] of cases) {
      const stream = openStream(client, request("group/manifests", globs));
      try {
        await until(() => stream.commits().length > 0, 10_000, `a commit for ${globs}`);
        expect([...stream.commits()[0]!.files.keys()].sort(), globs.join(" ")).toEqual(expected.sort());
      } finally {
        stream.cancel();
      }
    }
  });

  test("a file over 1 MiB spans consecutive objects of at most 1 MiB with the same source", async () => {
    const stream = openStream(client, request("group/manifests", ["big/*"]));
    try {
      await until(() => stream.commits().length > 0, 10_000, "the big file");
      const [commit] = stream.commits();
      expect(commit!.chunks.get("big/blob.bin")).toEqual([MiB, MiB, 12_345]);
      expect(commit!.files.get("big/blob.bin")!.equals(big)).toBe(true);
    } finally {
      stream.cancel();
    }
  });

  test("the agent's own commit is not sent again; a new commit and a push bring the next batch", async () => {
    const stream = openStream(client, request("group/manifests", ["manifests/*.yaml"], { commitId: first }));
    try {
      const next = await manifests.commit({
        "manifests/a.yaml": "kind: A2\n",
        "manifests/new.yaml": "kind: New\n",
      });
      expect(await pushTo(kas, { full_path: "group/manifests" })).toBe(204);
      await until(() => stream.commits().length > 0, 10_000, "the pushed commit");
      // Had the agent's commit been sent, it would come first.
      expect(stream.commits().map((c) => c.commitId)).toEqual([next]);
      expect(texts(stream.commits()[0]!)).toEqual({
        "manifests/a.yaml": "kind: A2\n",
        "manifests/new.yaml": "kind: New\n",
      });
      first = next;
      // And once more: a push with nothing new sends nothing; the next change arrives alone.
      expect(await pushTo(kas, { full_path: "group/manifests" })).toBe(204);
      const third = await manifests.commit({ "manifests/a.yaml": "kind: A3\n" });
      expect(await pushTo(kas, { full_path: "group/manifests" })).toBe(204);
      await until(() => stream.commits().length > 1, 10_000, "the third commit");
      expect(stream.commits().map((c) => c.commitId)).toEqual([next, third]);
      first = third;
    } finally {
      stream.cancel();
    }
  });

  test.each([
    [
      "files",
      ["many/*.yaml"],
      grpc.status.RESOURCE_EXHAUSTED,
      /match 6 files, more than max_number_of_files \(5\)/,
    ],
    [
      "total size",
      ["total/*.yaml"],
      grpc.status.RESOURCE_EXHAUSTED,
      /the matching files are larger than max_total_manifest_file_size \(4194304 bytes\) together/,
    ],
    [
      "file size",
      ["huge/*.yaml"],
      grpc.status.RESOURCE_EXHAUSTED,
      /huge\/h\.yaml is larger than max_manifest_file_size \(3145728 bytes\)/,
    ],
    [
      "paths",
      ["a/*", "b/*", "c/*", "d/*"],
      grpc.status.FAILED_PRECONDITION,
      /4 path globs, more than max_number_of_paths \(3\)/,
    ],
    ["an empty glob", [""], grpc.status.INVALID_ARGUMENT, /paths\[0\] glob "" is empty/],
    [
      "a glob leaving the project",
      ["../*"],
      grpc.status.INVALID_ARGUMENT,
      /glob "\.\.\/\*" has a "\.\." component/,
    ],
  ])(
    "a limit (%s): nothing sent, the stream ends with the status and why",
    async (_, globs, code, message) => {
      const stream = openStream(client, request("group/limits", globs));
      const status = await ended(stream, "the refusal");
      expect(status.code).toBe(code);
      expect(status.details).toMatch(message);
      expect(stream.commits()).toEqual([]);
      expect(stream.messages).toEqual([]);
    },
  );

  test("refs: a bad name is INVALID_ARGUMENT, a missing branch FAILED_PRECONDITION, a tag and a commit are read", async () => {
    const bad = openStream(client, request("group/manifests", ["*.yaml"], { ref: { branch: "main..x" } }));
    expect((await ended(bad, "bad ref")).code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(bad.status!.details).toContain('branch name "main..x"');
    const missing = openStream(client, request("group/manifests", ["*.yaml"], { ref: { branch: "nope" } }));
    expect((await ended(missing, "missing ref")).code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(missing.status!.details).toBe('project "group/manifests": branch "nope" does not exist');

    const old = await manifests.git(["rev-list", "--max-parents=0", "main"]);
    await manifests.tag("v1", old);
    for (const ref of [{ tag: "v1" }, { commit: old }]) {
      const stream = openStream(client, request("group/manifests", ["*.yaml"], { ref }));
      try {
        await until(() => stream.commits().length > 0, 10_000, `the commit of ${JSON.stringify(ref)}`);
        expect(stream.commits()[0]!.commitId).toBe(old);
      } finally {
        stream.cancel();
      }
    }
  });

  test("a project not among the agent's manifest projects: PERMISSION_DENIED, shown on the API", async () => {
    const stream = openStream(client, request("group/other", ["*.yaml"]));
    const status = await ended(stream, "the refusal");
    expect(status.code).toBe(grpc.status.PERMISSION_DENIED);
    expect(status.details).toContain('project "group/other": not among the manifest projects of agent 42');
    expect(stream.messages).toEqual([]);
    const shown = await shownGitops(kas, 42);
    const entry = shown.manifest_projects.find((p) => p.project === "group/other");
    expect(entry?.last_error).toMatchObject({ source: "kas", kind: "refused", code: "PERMISSION_DENIED" });
    // The limits refused above are shown too, the last one with its message.
    const limitsEntry = shown.manifest_projects.find((p) => p.project === "group/limits");
    expect(limitsEntry?.last_error?.code).toMatch(/RESOURCE_EXHAUSTED|FAILED_PRECONDITION|INVALID_ARGUMENT/);
  });

  test("ReportSync: shown on the API with the last commit sent, counted in the metrics", async () => {
    const stream = openStream(client, request("group/manifests", ["manifests/*.yaml"]));
    try {
      await until(() => stream.commits().length > 0, 10_000, "a commit");
    } finally {
      stream.cancel();
    }
    const commitId = stream.commits()[0]!.commitId;
    const before = await metricsOf(kas.addresses.observability);
    const err = await reportSync(client, {
      projectId: "group/manifests",
      commitId,
      durationMs: "1234",
      objects: [
        {
          group: "apps",
          kind: "Deployment",
          namespace: "default",
          name: "web",
          status: "applied",
          error: "",
          source: "manifests/a.yaml",
        },
        {
          group: "",
          kind: "ConfigMap",
          namespace: "default",
          name: "cm",
          status: "failed",
          error: "admission webhook said no",
          source: "manifests/new.yaml",
        },
      ],
      error: "",
      mode: "",
    });
    expect(err).toBeNull();
    const shown = await shownGitops(kas, 42);
    const entry = shown.manifest_projects.find((p) => p.project === "group/manifests")!;
    expect(entry.last_sent).toMatchObject({ commitId, files: 1 }); // the third commit holds manifests/a.yaml alone
    expect(entry.last_sync).toMatchObject({
      commitId,
      durationMs: 1234,
      mode: "apply",
      counts: { applied: 1, failed: 1 },
    });
    expect(entry.last_sync!.objects).toHaveLength(2);
    expect(entry.last_error).toBeNull(); // the commit was sent: earlier refusals of this project are over
    const after = await metricsOf(kas.addresses.observability);
    expect(
      metricValue(after, "kas_gitops_syncs_total", { result: "failed" }) -
        metricValue(before, "kas_gitops_syncs_total", { result: "failed" }),
    ).toBe(1);
    expect(
      metricValue(after, "kas_gitops_objects_total", { status: "applied" }) -
        metricValue(before, "kas_gitops_objects_total", { status: "applied" }),
    ).toBe(1);

    // The agent's error becomes the project's last error.
    expect(
      await reportSync(client, {
        projectId: "group/manifests",
        commitId,
        error: "invalid YAML in manifests/a.yaml",
      }),
    ).toBeNull();
    const again = (await shownGitops(kas, 42)).manifest_projects.find(
      (p) => p.project === "group/manifests",
    )!;
    expect(again.last_error).toMatchObject({ source: "agent", message: "invalid YAML in manifests/a.yaml" });
  });

  test("ReportSync: refused for a project the agent may not read, and when malformed", async () => {
    const denied = await reportSync(client, { projectId: "group/other", commitId: "" });
    expect(denied?.code).toBe(grpc.status.PERMISSION_DENIED);
    const badStatus = await reportSync(client, {
      projectId: "group/manifests",
      objects: [
        { group: "", kind: "X", namespace: "", name: "x", status: "exploded", error: "", source: "" },
      ],
    });
    expect(badStatus?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(badStatus?.details).toContain('objects[0].status "exploded"');
    const tooMany = await reportSync(client, {
      projectId: "group/manifests",
      objects: Array.from({ length: 10_001 }, () => ({
        group: "",
        kind: "X",
        namespace: "",
        name: "x",
        status: "applied",
        error: "",
        source: "",
      })),
    });
    expect(tooMany?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(tooMany?.details).toContain("10001 object results, more than the 10000 kas keeps");
  });

  test("the stream ends when the agent's tunnel closes", async () => {
    const { agent: other, client: otherClient } = await agentWithRawClient(kas.addresses.agent, OTHER_TOKEN);
    try {
      const stream = openStream(otherClient, request("group/other", ["*.yaml"]));
      await until(() => stream.commits().length > 0, 10_000, "the other agent's commit");
      const streams = async () =>
        metricValue(await metricsOf(kas.addresses.observability), "kas_gitops_streams");
      expect(await streams()).toBeGreaterThanOrEqual(1);
      const open = await streams();
      await other.stop();
      await until(async () => (await streams()) === open - 1, 10_000, "the stream closed at kas");
      await until(() => stream.status !== undefined, 10_000, "the client's status");
    } finally {
      otherClient.close();
      await other.stop();
    }
  });
});
