// Two kas replicas sharing a real Redis, the agent's tunnel on replica A: a git push sent to B brings
// the next commit on A's stream (the poll period is an hour), and B's API shows what A sent, the
// refusal A recorded and the sync the agent reported through A.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { GitopsServiceClient } from "../../../../proto/gen/gitops/v1/gitops.ts";
import { TOKEN } from "../../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../../kas/support/in-process.ts";
import type { InProcessAgentk } from "../../../support/agentk-in-process.ts";
import { GitRepo } from "../../../support/git-repo.ts";
import { RedisServer } from "../../../support/redis-server.ts";
import { until } from "../../../support/until.ts";
import { kasApi, pushTo } from "../../agent_configuration/helpers.ts";
import { agentWithRawClient, openStream, reportSync, request, tokenLine } from "./helpers.ts";

describe("GitOps across kas replicas (shared Redis)", () => {
  let dir: string;
  let redis: RedisServer;
  let repo: GitRepo;
  let a: InProcessKas;
  let b: InProcessKas;
  let agent: InProcessAgentk;
  let client: GitopsServiceClient;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "gitops-replicas-"));
    redis = await RedisServer.start();
    repo = await GitRepo.init();
    await repo.commit({ "app.yaml": "kind: A\n" });
    const tokensFile = join(dir, "tokens.yaml");
    await writeFile(
      tokensFile,
      `${tokenLine(TOKEN, { agentId: 42, projectId: 7, agentName: "prod", manifests: { "group/manifests": repo.path } })}\n`,
    );
    const adjust = (config: InProcessKas["config"]) => {
      config.agent.staticTokensFile = tokensFile;
      config.agent.gitops.pollPeriodMs = 3_600_000; // only a push explains a new commit
    };
    const cluster = { redis: { host: redis.host, port: redis.port } };
    a = await startInProcessKas(adjust, cluster);
    b = await startInProcessKas(adjust, cluster);
    ({ agent, client } = await agentWithRawClient(a.addresses.agent, TOKEN));
  });
  afterAll(async () => {
    client?.close();
    await agent?.stop();
    await Promise.all([a?.close(), b?.close()]);
    await redis?.close();
    await repo?.remove();
    await rm(dir, { recursive: true, force: true });
  });

  test("a push sent to B brings the next commit on A's stream; B's API shows what A sent and the agent reported", async () => {
    const stream = openStream(client, request("group/manifests", ["*.yaml"]));
    let next: string;
    try {
      await until(() => stream.commits().length > 0, 10_000, "the first commit");
      next = await repo.commit({ "app.yaml": "kind: A2\n" });
      expect(await pushTo(b, { full_path: "group/manifests" })).toBe(204);
      await until(() => stream.commits().length > 1, 10_000, "the commit pushed through B");
      expect(stream.commits()[1]!.commitId).toBe(next);
    } finally {
      stream.cancel();
    }
    expect(
      await reportSync(client, { projectId: "group/manifests", commitId: next, durationMs: "5" }),
    ).toBeNull();
    const refused = openStream(client, request("group/manifests", ["../abs"]));
    await until(() => refused.status !== undefined, 10_000, "a refusal");
    expect(refused.status!.code).toBe(grpc.status.INVALID_ARGUMENT);

    const res = await kasApi(b, "/api/v1/agents/42/gitops");
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      manifest_projects: Array<{
        project: string;
        last_sent: unknown;
        last_sync: unknown;
        last_error: unknown;
      }>;
    };
    expect(body.manifest_projects).toHaveLength(1);
    expect(body.manifest_projects[0]).toMatchObject({
      project: "group/manifests",
      last_sent: { commitId: next, files: 1 },
      last_sync: { commitId: next, durationMs: 5 },
      last_error: { source: "kas", kind: "refused", code: "INVALID_ARGUMENT" },
    });
  });
});
