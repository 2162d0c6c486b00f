// An agent gets its own configuration and nobody else's: two agents (same agent name, different
// configuration projects) each get their own file; a raw GetConfiguration call over agent A's
// tunnel gets A's configuration whatever commit id it sends; a call that did not come over an
// agent's tunnel is UNAUTHENTICATED.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { Gauge, Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createAgentRpcServer } from "../../../cmd/kas/agent-rpc.ts";
import { addAgentConfigurationService } from "../../../modules/agent_configuration/kas/rpc.ts";
import { deserializeAgentConfiguration } from "../../../modules/agentcfg/index.ts";
import { type AgentkModuleFactory, Phase } from "../../../modules/runtime/index.ts";
import {
  AgentConfigurationServiceClient,
  type GetConfigurationResponse,
} from "../../../proto/gen/agent_configuration/v1/agent_configuration.ts";
import { OTHER_TOKEN, TOKEN } from "../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { GitRepo } from "../../support/git-repo.ts";
import { until } from "../../support/until.ts";
import { pushTo, tokenLine } from "./helpers.ts";

// Both agents are called "prod": the same path, in different projects.
const FILE = ".gitlab/agents/prod/config.yaml";
const config = (level: string, manifests: string) =>
  `observability:\n  logging:\n    level: ${level}\ngitops:\n  manifest_projects:\n    - id: ${manifests}\n`;

/** A GetConfiguration stream, its messages collected. */
function openStream(client: AgentConfigurationServiceClient, commitId: string) {
  const messages: GetConfigurationResponse[] = [];
  let status: grpc.StatusObject | undefined;
  const call = client.getConfiguration({ commitId }, new grpc.Metadata({ waitForReady: true }));
  call.on("data", (m: GetConfigurationResponse) => messages.push(m));
  call.on("error", () => {});
  call.on("status", (s: grpc.StatusObject) => {
    status = s;
  });
  return {
    messages,
    get status() {
      return status;
    },
    cancel: () => call.cancel(),
  };
}

describe("each agent gets its own configuration, and only over its own tunnel", () => {
  let dir: string;
  let repoA: GitRepo;
  let repoB: GitRepo;
  let commitA: string;
  let commitB: string;
  let kas: InProcessKas;
  let a: InProcessAgentk;
  let b: InProcessAgentk;
  /** Agent A's gRPC channel to kas (over its tunnel), from a module of the test's own. */
  let channelA: grpc.Channel | undefined;
  let raw: AgentConfigurationServiceClient;
  const manifestsOf = (agent: InProcessAgentk) =>
    agent.agent.configuration.current?.gitops?.manifest_projects[0]?.id;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "agent-config-isolation-"));
    repoA = await GitRepo.init();
    repoB = await GitRepo.init();
    commitA = await repoA.commit({ [FILE]: config("debug", "group/a-manifests") });
    commitB = await repoB.commit({ [FILE]: config("warn", "group/b-manifests") });
    const tokensFile = join(dir, "tokens.yaml");
    await writeFile(
      tokensFile,
      [
        tokenLine(TOKEN, { agentId: 42, projectId: 7, agentName: "prod", repository: repoA.path }),
        tokenLine(OTHER_TOKEN, { agentId: 43, projectId: 8, agentName: "prod", repository: repoB.path }),
      ].join("\n"),
    );
    kas = await startInProcessKas((c) => {
      c.agent.staticTokensFile = tokensFile;
      c.agent.configuration.pollPeriodMs = 3_600_000;
    });
    const capture: AgentkModuleFactory = {
      name: "test_capture_channel",
      phase: Phase.capability,
      create: ({ kasRpc }) => {
        channelA = kasRpc;
        return { name: "test_capture_channel" };
      },
    };
    a = await startInProcessAgentk({ kasUrl: kas.addresses.agent, token: TOKEN, modules: [capture] });
    b = await startInProcessAgentk({ kasUrl: kas.addresses.agent, token: OTHER_TOKEN });
    raw = new AgentConfigurationServiceClient("kas", grpc.credentials.createInsecure(), {
      channelOverride: channelA!,
    });
  });
  afterAll(async () => {
    raw?.close();
    await Promise.all([a?.stop(), b?.stop()]);
    await kas?.close();
    await Promise.all([repoA?.remove(), repoB?.remove()]);
    await rm(dir, { recursive: true, force: true });
  });

  test("each agentk's configuration is its own file from its own project", async () => {
    await until(() => manifestsOf(a) !== undefined && manifestsOf(b) !== undefined, 10_000, "configurations");
    expect(manifestsOf(a)).toBe("group/a-manifests");
    expect(a.agent.configuration.current?.observability.logging.level).toBe("debug");
    expect(manifestsOf(b)).toBe("group/b-manifests");
    expect(b.agent.configuration.current?.observability.logging.level).toBe("warn");
  });

  test.each([
    ["no commit", () => ""],
    ["agent B's commit", () => commitB],
    ["an unknown commit", () => "0".repeat(40)],
    ["a long garbage id", () => "x".repeat(500)],
  ])("over A's tunnel, with %s: A's configuration", async (_, commit) => {
    const stream = openStream(raw, commit());
    try {
      await until(() => stream.messages.length > 0, 10_000, "a configuration");
      const [first] = stream.messages;
      expect(first!.commitId).toBe(commitA);
      const received = deserializeAgentConfiguration(first!.configurationJson);
      expect(received.gitops?.manifest_projects[0]?.id).toBe("group/a-manifests");
      expect(first!.configurationJson).not.toContain("b-manifests");
    } finally {
      stream.cancel();
    }
  });

  test("over A's tunnel with A's commit: nothing until A's project changes; B's changes never come", async () => {
    const stream = openStream(raw, commitA);
    try {
      // B's project changes first: its agent gets it, A's stream nothing.
      commitB = await repoB.commit({ [FILE]: config("warn", "group/b-manifests-2") });
      expect(await pushTo(kas, { id: 8 })).toBe(204);
      await until(() => manifestsOf(b) === "group/b-manifests-2", 10_000, "B's change on B");
      commitA = await repoA.commit({ [FILE]: config("debug", "group/a-manifests-2") });
      expect(await pushTo(kas, { id: 7 })).toBe(204);
      await until(() => stream.messages.length > 0, 10_000, "A's change on the raw stream");
      expect(stream.messages.map((m) => m.commitId)).toEqual([commitA]);
      expect(stream.messages[0]!.configurationJson).toContain("a-manifests-2");
      await until(() => manifestsOf(a) === "group/a-manifests-2", 10_000, "A's change on A");
      expect(stream.status).toBeUndefined(); // still open
    } finally {
      stream.cancel();
    }
  });
});

describe("the agents' gRPC server", () => {
  test("GetConfiguration not over an agent's tunnel is UNAUTHENTICATED, and subscribes to nothing", async () => {
    const rpc = createAgentRpcServer(1000);
    const subscribed: unknown[] = [];
    const streams = new Gauge({ name: "test_streams", help: "test", registers: [new Registry()] });
    addAgentConfigurationService(
      rpc,
      {
        subscribe: (agent) => {
          subscribed.push(agent);
          return () => {};
        },
      },
      { streams },
    );
    const port = await new Promise<number>((resolve, reject) =>
      rpc.server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    const client = new AgentConfigurationServiceClient(
      `127.0.0.1:${port}`,
      grpc.credentials.createInsecure(),
    );
    try {
      const stream = openStream(client, "");
      await until(() => stream.status !== undefined, 5_000, "the call's status");
      expect(stream.status?.code).toBe(grpc.status.UNAUTHENTICATED);
      expect(stream.messages).toEqual([]);
      expect(subscribed).toEqual([]);
    } finally {
      client.close();
      rpc.server.forceShutdown();
    }
  });
});
