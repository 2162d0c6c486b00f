import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { get as httpsGet } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import {
  bearer,
  failure,
  gitlabServiceClients,
  grpcTarget,
  listServices,
  unary,
} from "../../support/gitlab-grpc.ts";
import { RedisServer } from "../../support/redis-server.ts";
import { testPki } from "../../support/tls-certs.ts";
import { AGENT_ID, gitlabJwt, TOKEN } from "../support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../support/in-process.ts";

type Agents = { agents: Array<{ agent_id: string; project_id: string; agent_meta: { version: string } }> };
const clients = gitlabServiceClients();
const insecure = grpc.credentials.createInsecure();

/** What the observability port says a counter is (0 when absent). */
async function counter(kas: InProcessKas, line: string): Promise<number> {
  const text = await (await fetch(`${kas.addresses.observability}/metrics`)).text();
  const found = text.split("\n").find((l) => l.startsWith(line));
  return found ? Number(found.slice(line.length).trim()) : 0;
}

describe("gRPC for GitLab on the API port, cleartext HTTP/2 beside HTTP/1.1 JSON", () => {
  let kas: InProcessKas;
  let agent: InProcessAgentk;
  let jwt: string;
  let tracker: grpc.Client;

  beforeAll(async () => {
    kas = await startInProcessKas();
    // GitLab signs with its host name as issuer (Gitlab::Kas::Client#token).
    jwt = await gitlabJwt(kas.apiSecret, { iss: "gitlab.example.com" });
    agent = await startInProcessAgentk({ kasUrl: kas.addresses.agent, token: TOKEN, services: {} });
    await agent.agent.client.ready(5000);
    tracker = new clients.AgentTracker(grpcTarget(kas.addresses.api!), insecure);
  });
  afterAll(async () => {
    tracker?.close();
    await agent?.stop();
    await kas?.close();
  });

  it("AgentTracker: the connected agents by agent id and by project id, as GitLab's wire names ask", async () => {
    const byAgent = await unary<Agents>(
      tracker,
      "GetConnectedAgentsByAgentIDs",
      { agent_ids: [AGENT_ID, "999"] },
      bearer(jwt),
    );
    expect(byAgent.agents).toHaveLength(1);
    expect(byAgent.agents[0]).toMatchObject({ agent_id: AGENT_ID, project_id: "7" });
    const byProject = await unary<Agents>(
      tracker,
      "GetConnectedAgentsByProjectIDs",
      { project_ids: ["7"] },
      bearer(jwt),
    );
    expect(byProject.agents.map((a) => a.agent_id)).toEqual([AGENT_ID]);
    const none = await unary<Agents>(
      tracker,
      "GetConnectedAgentsByProjectIDs",
      { project_ids: ["8"] },
      bearer(jwt),
    );
    expect(none.agents).toEqual([]);
  });

  it("refuses calls without GitLab's JWT: UNAUTHENTICATED, the handler never runs", async () => {
    const wrongSecret = await gitlabJwt(new Uint8Array(32));
    const wrongAudience = await gitlabJwt(kas.apiSecret, { aud: "gitlab" });
    const noMetadata = new grpc.Metadata();
    const notBearer = new grpc.Metadata();
    notBearer.set("authorization", `basic ${jwt}`);
    for (const metadata of [
      bearer(wrongSecret),
      bearer(wrongAudience),
      bearer("not-a-jwt"),
      noMetadata,
      notBearer,
    ]) {
      const err = await failure(
        unary(tracker, "GetConnectedAgentsByAgentIDs", { agent_ids: [AGENT_ID] }, metadata),
      );
      expect(err.code).toBe(grpc.status.UNAUTHENTICATED);
      expect(err.details).not.toContain(jwt);
    }
    // Even before validation, a request with bad ids and no JWT is refused for the JWT.
    const err = await failure(unary(tracker, "GetConnectedAgentsByAgentIDs", { agent_ids: [] }, noMetadata));
    expect(err.code).toBe(grpc.status.UNAUTHENTICATED);
  });

  it("INVALID_ARGUMENT for ids that cannot be GitLab's", async () => {
    for (const agent_ids of [[], ["0"], ["-5"]]) {
      const err = await failure(unary(tracker, "GetConnectedAgentsByAgentIDs", { agent_ids }, bearer(jwt)));
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err.details).toMatch(/agent_ids/);
    }
  });

  it("HTTP/1.1 JSON still answers on the same port, with its own JWT header", async () => {
    const res = await fetch(`${kas.addresses.api}/api/v1/agents`, {
      headers: { "gitlab-kas-api-request": await gitlabJwt(kas.apiSecret) },
    });
    expect(res.status).toBe(200);
    expect(
      ((await res.json()) as { agents: Array<{ agentId: string }> }).agents.map((a) => a.agentId),
    ).toEqual([AGENT_ID]);
    expect((await fetch(`${kas.addresses.api}/api/v1/agents`)).status).toBe(401);
  });

  it("Notifications.GitPushEvent: the same effect as the HTTP notification (every replica's modules hear it)", async () => {
    const notifications = new clients.Notifications(grpcTarget(kas.addresses.api!), insecure);
    try {
      const heard = 'kas_git_push_notifications_total{result="unknown"}';
      const before = await counter(kas, heard);
      await unary(
        notifications,
        "GitPushEvent",
        { event: { project: { id: "7", full_path: "group/p" } } },
        bearer(jwt),
      );
      expect(await counter(kas, heard)).toBe(before + 1);
      const http = await fetch(`${kas.addresses.api}/api/v1/notifications/git_push`, {
        method: "POST",
        headers: {
          "gitlab-kas-api-request": await gitlabJwt(kas.apiSecret),
          "content-type": "application/json",
        },
        body: JSON.stringify({ project: { id: 7 } }),
      });
      expect(http.status).toBe(204);
      expect(await counter(kas, heard)).toBe(before + 2);
      for (const event of [{}, { project: {} }, { project: { id: "-1" } }]) {
        const err = await failure(unary(notifications, "GitPushEvent", { event }, bearer(jwt)));
        expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      }
      expect(await counter(kas, heard)).toBe(before + 2);
    } finally {
      notifications.close();
    }
  });

  it("health: SERVING while kas is ready, NOT_SERVING when a readiness check fails; no JWT needed", async () => {
    const health = new clients.Health(grpcTarget(kas.addresses.api!), insecure);
    try {
      const ok = await unary<{ status: string }>(health, "Check", { service: "" }, new grpc.Metadata());
      expect(ok.status).toBe("SERVING");
      const named = await unary<{ status: string }>(
        health,
        "Check",
        { service: "gitlab.agent.agent_tracker.rpc.AgentTracker" },
        new grpc.Metadata(),
      );
      expect(named.status).toBe("SERVING");
      const remove = kas.kas.readiness.add("test-broken", () => {
        throw new Error("broken on purpose");
      });
      try {
        const down = await unary<{ status: string }>(health, "Check", { service: "" }, new grpc.Metadata());
        expect(down.status).toBe("NOT_SERVING");
      } finally {
        remove();
      }
      const unknown = await failure(
        unary(health, "Check", { service: "no.such.Service" }, new grpc.Metadata()),
      );
      expect(unknown.code).toBe(grpc.status.NOT_FOUND);
    } finally {
      health.close();
    }
  });

  it("reflection lists every service and describes them without our .proto files (JWT required)", async () => {
    const reflection = new clients.Reflection(grpcTarget(kas.addresses.api!), insecure);
    try {
      const { services, describe } = await listServices(
        reflection,
        bearer(jwt),
        "gitlab.agent.agent_tracker.rpc.AgentTracker",
      );
      expect(services).toEqual(
        expect.arrayContaining([
          "gitlab.agent.agent_tracker.rpc.AgentTracker",
          "gitlab.agent.notifications.rpc.Notifications",
          "gitlab.agent.configuration_project.rpc.ConfigurationProject",
          "cluster_views.v1.ClusterViewsWatchService",
          "grpc.health.v1.Health",
        ]),
      );
      // The serialized FileDescriptorProto names the methods GitLab calls.
      expect(describe).toContain("GetConnectedAgentsByProjectIDs");
      expect(describe).toContain("GetConnectedAgentsByAgentIDs");
      const refused = await failure(listServices(reflection, new grpc.Metadata()));
      expect(refused.code).toBe(grpc.status.UNAUTHENTICATED);
    } finally {
      reflection.close();
    }
  });

  it("kas_request_duration_seconds counts gRPC calls by method and status code", async () => {
    const line =
      'kas_request_duration_seconds_count{route="/gitlab.agent.agent_tracker.rpc.AgentTracker/GetConnectedAgentsByAgentIDs",status="UNAUTHENTICATED"}';
    const before = await counter(kas, line);
    await unary(tracker, "GetConnectedAgentsByAgentIDs", { agent_ids: [AGENT_ID] }, bearer("bad")).catch(
      () => {},
    );
    expect(await counter(kas, line)).toBe(before + 1);
  });
});

describe("gRPC for GitLab over TLS: ALPN h2 is gRPC, http/1.1 is JSON", () => {
  let kas: InProcessKas;
  let dir: string;
  let ca: string;

  beforeAll(async () => {
    const pki = await testPki();
    ca = pki.caCert;
    dir = await mkdtemp(join(tmpdir(), "kas-grpc-tls-"));
    await writeFile(join(dir, "cert.pem"), pki.cert);
    await writeFile(join(dir, "key.pem"), pki.key);
    kas = await startInProcessKas((config) => {
      config.api.listen.certificateFile = join(dir, "cert.pem");
      config.api.listen.keyFile = join(dir, "key.pem");
    });
  });
  afterAll(async () => {
    await kas?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("serves gRPC to a TLS client and JSON to an HTTPS/1.1 client on the one port", async () => {
    expect(kas.addresses.api).toMatch(/^https:/);
    const target = `localhost:${new URL(kas.addresses.api!).port}`;
    const tracker = new clients.AgentTracker(target, grpc.credentials.createSsl(Buffer.from(ca)));
    try {
      const jwt = await gitlabJwt(kas.apiSecret, { iss: "gitlab.example.com" });
      const answer = await unary<Agents>(
        tracker,
        "GetConnectedAgentsByAgentIDs",
        { agent_ids: [AGENT_ID] },
        bearer(jwt),
      );
      expect(answer.agents).toEqual([]);
      const err = await failure(
        unary(tracker, "GetConnectedAgentsByAgentIDs", { agent_ids: [AGENT_ID] }, bearer("x")),
      );
      expect(err.code).toBe(grpc.status.UNAUTHENTICATED);
    } finally {
      tracker.close();
    }
    const jsonJwt = await gitlabJwt(kas.apiSecret);
    const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      httpsGet(
        `https://localhost:${new URL(kas.addresses.api!).port}/api/v1/agents`,
        { ca, headers: { "gitlab-kas-api-request": jsonJwt } },
        (res) => {
          let text = "";
          res.on("data", (c) => {
            text += c;
          });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
        },
      ).on("error", reject);
    });
    expect(status).toBe(200);
    expect(JSON.parse(body)).toEqual({ agents: [] });
  });
});

describe("AgentTracker with Redis that cannot answer", () => {
  let redis: RedisServer;
  let kas: InProcessKas;

  beforeAll(async () => {
    redis = await RedisServer.start();
    kas = await startInProcessKas(() => {}, { redis: redis.connection as { host: string; port: number } });
  });
  afterAll(async () => {
    await kas?.close();
    await redis?.close();
  });

  it("UNAVAILABLE, saying why", async () => {
    const tracker = new clients.AgentTracker(grpcTarget(kas.addresses.api!), insecure);
    try {
      const jwt = await gitlabJwt(kas.apiSecret);
      await unary(tracker, "GetConnectedAgentsByAgentIDs", { agent_ids: [AGENT_ID] }, bearer(jwt));
      const down = once(kas.kas.router!.cluster as unknown as NodeJS.EventEmitter, "down");
      await redis.stop();
      await down;
      const err = await failure(
        unary(tracker, "GetConnectedAgentsByAgentIDs", { agent_ids: [AGENT_ID] }, bearer(jwt)),
      );
      expect(err.code).toBe(grpc.status.UNAVAILABLE);
      expect(err.details).toMatch(/other kas replicas/);
    } finally {
      tracker.close();
    }
  });
});
