import { randomBytes } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ApiRouteTable,
  bearerToken,
  createGitLabRpcServer,
  type GitLabRpcServer,
  serveApi,
} from "../../../cmd/kas/api/index.ts";
import { ReadinessChecks } from "../../../cmd/kas/observability/index.ts";
import { AgentTrackerService } from "../../../proto/gen/agent_tracker/v1/gitlab_rpc.ts";
import type { HttpListener } from "../../../tool/http/serve/index.ts";
import { gitlabServiceClients, grpcTarget, unary } from "../../support/gitlab-grpc.ts";
import { silentLogger } from "../support/fixtures.ts";

describe("bearerToken (the authorization metadata GitLab sends)", () => {
  const md = (value: string) => {
    const m = new grpc.Metadata();
    m.set("authorization", value);
    return m;
  };
  it("takes the token after `bearer` in any case, and nothing else", () => {
    const token = fc.stringMatching(/^[A-Za-z0-9._~+/=-]{1,200}$/);
    fc.assert(
      fc.property(
        token,
        fc.constantFrom("bearer", "Bearer", "BEARER"),
        fc.stringMatching(/^ {1,3}$/),
        (t, scheme, gap) => {
          expect(bearerToken(md(`${scheme}${gap}${t}`))).toBe(t);
        },
      ),
    );
    fc.assert(
      fc.property(fc.stringMatching(/^[\x20-\x7e]{0,100}$/), (value) => {
        const got = bearerToken(md(value));
        // (Metadata values are printable ASCII.) Whatever comes back was in the value after the scheme, with no whitespace in it.
        if (got !== undefined) {
          expect(value.toLowerCase().startsWith("bearer")).toBe(true);
          expect(value).toContain(got);
          expect(/\s/.test(got)).toBe(false);
        }
      }),
    );
    for (const value of ["", "bearer", "bearer ", "basic abc", "bearer a b", "bearerabc"]) {
      expect(bearerToken(md(value))).toBeUndefined();
    }
    expect(bearerToken(new grpc.Metadata())).toBeUndefined();
  });
});

describe("createGitLabRpcServer", () => {
  const secret = new Uint8Array(randomBytes(32));
  let rpc: GitLabRpcServer;
  let listener: HttpListener;
  let health: grpc.Client;

  beforeAll(async () => {
    rpc = createGitLabRpcServer({
      secret,
      readiness: new ReadinessChecks(),
      log: silentLogger(),
      healthRefreshMs: 50,
    });
    rpc.addService(
      AgentTrackerService,
      {
        getConnectedAgentsByProjectIDs: (_call: unknown, cb: grpc.sendUnaryData<unknown>) =>
          cb(null, { agents: [] }),
        getConnectedAgentsByAgentIDs: (_call: unknown, cb: grpc.sendUnaryData<unknown>) =>
          cb(null, { agents: [] }),
      },
      "agent_tracker/v1/gitlab_rpc.proto",
    );
    rpc.start();
    listener = await serveApi({
      listen: { address: { host: "127.0.0.1", port: 0 } },
      secret,
      routes: new ApiRouteTable(),
      grpc: rpc.connections,
    });
    health = new (gitlabServiceClients().Health)(grpcTarget(listener.url), grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    health?.close();
    await listener?.close(0);
  });

  it("refuses a service added twice, naming it", () => {
    expect(() => rpc.addService(AgentTrackerService, {}, "agent_tracker/v1/gitlab_rpc.proto")).toThrow(
      /gitlab\.agent\.agent_tracker\.rpc\.AgentTracker added twice/,
    );
  });

  it("health Watch streams SERVING, then NOT_SERVING once kas drains", async () => {
    const call = (
      health as unknown as {
        Watch(r: object, m: grpc.Metadata): grpc.ClientReadableStream<{ status: string }>;
      }
    ).Watch({ service: "" }, new grpc.Metadata());
    const seen: string[] = [];
    const notServing = new Promise<void>((resolve) =>
      call.on("data", ({ status }: { status: string }) => {
        seen.push(status);
        if (status === "SERVING") rpc.drain();
        if (status === "NOT_SERVING" && seen.includes("SERVING")) resolve();
      }),
    );
    call.on("error", () => {});
    await notServing;
    call.cancel();
    expect(seen.at(-1)).toBe("NOT_SERVING");
    const checked = await unary<{ status: string }>(health, "Check", { service: "" }, new grpc.Metadata());
    expect(checked.status).toBe("NOT_SERVING");
  });
});
