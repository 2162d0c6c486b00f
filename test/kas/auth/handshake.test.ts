import { afterEach, describe, expect, test } from "vitest";
import {
  type AgentIdentity,
  CachedAuthenticator,
  createAgentAuthenticate,
  GitLabAuthenticator,
} from "../../../cmd/kas/auth/index.ts";
import { createKasMetrics } from "../../../cmd/kas/observability/index.ts";
import { dial, type HandshakeError, serveTunnels, type TunnelSession } from "../../../lib/tunnel/index.ts";
import { AGENT, memoryLogger, startGitLab, TOKEN } from "./helpers.ts";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

/** kas's agent listener for real: serveTunnels on loopback, authenticating against the GitLab test server. */
async function startKas() {
  const { api, secret } = await startGitLab();
  const { log, text } = memoryLogger();
  const metrics = createKasMetrics();
  const gitlab = new GitLabAuthenticator({
    gitlabUrl: api.url,
    secret,
    log,
    maxAttempts: 2,
    backoff: { initialMs: 5 },
  });
  const sessions: TunnelSession<AgentIdentity>[] = [];
  const server = await serveTunnels<AgentIdentity>({
    host: "127.0.0.1",
    port: 0,
    authenticate: createAgentAuthenticate({
      authenticator: new CachedAuthenticator(gitlab),
      log,
      onResult: (result) => metrics.agentAuth.inc({ result }),
    }),
    onSession: (s) => sessions.push(s),
  });
  cleanups.push(
    () => server.close(100),
    () => gitlab.close(),
    () => api.close(),
  );
  return { api, server, sessions, logs: text, metrics };
}

async function refusal(url: string, headers: Record<string, string>): Promise<HandshakeError> {
  const err = await dial(url, { headers }).then(
    (c) => {
      c.close();
      throw new Error("handshake unexpectedly accepted");
    },
    (e: unknown) => e as HandshakeError,
  );
  expect(err.name).toBe("HandshakeError");
  return err;
}

describe("the agent listener's authenticate hook", () => {
  test("a valid agent token: the tunnel is up and its identity is the agent, token redacted", async () => {
    const { server, sessions, metrics } = await startKas();
    const conn = await dial(server.url, { headers: { Authorization: `Bearer ${TOKEN}` } });
    cleanups.push(async () => conn.close());
    expect(conn.identity).toBeUndefined();
    const [session] = sessions;
    expect(session!.identity).toMatchObject({ agentId: "42", projectId: "7", agentName: AGENT.agentName });
    expect(session!.identity.token.reveal()).toBe(TOKEN);
    expect(JSON.stringify(session!.identity)).not.toContain(TOKEN);
    expect(String(session!.identity.token)).toBe("[REDACTED]");
    expect(await metrics.registry.getSingleMetricAsString("kas_agent_authentications_total")).toContain(
      'kas_agent_authentications_total{result="ok"} 1',
    );
  });

  test("the pod agentk names in its handshake joins the identity, for logs; over-long values are dropped", async () => {
    const { server, sessions } = await startKas();
    const a = await dial(server.url, {
      headers: {
        Authorization: `Bearer ${TOKEN}`,
        "X-Agentk-Pod-Name": "agentk-7d9f",
        "X-Agentk-Pod-Namespace": "gitlab-agent",
      },
    });
    const b = await dial(server.url, {
      headers: { Authorization: `Bearer ${TOKEN}`, "X-Agentk-Pod-Name": "p".repeat(254) },
    });
    cleanups.push(async () => {
      a.close();
      b.close();
    });
    expect(sessions[0]!.identity.pod).toEqual({ name: "agentk-7d9f", namespace: "gitlab-agent" });
    expect(sessions[1]!.identity.pod).toBeUndefined();
  });

  test.each([
    ["no Authorization header", {}],
    ["a Basic Authorization header", { Authorization: "Basic dXNlcjpwYXNz" }],
    ["Bearer without a token", { Authorization: "Bearer " }],
    ["a token with spaces", { Authorization: "Bearer two words" }],
    ["an absurdly long token", { Authorization: `Bearer ${"x".repeat(1025)}` }],
  ])("%s: 401 before asking GitLab", async (_, headers) => {
    const { api, server } = await startKas();
    const err = await refusal(server.url, headers);
    expect(err.status).toBe(401);
    expect(err.body).toContain('expected "Authorization: Bearer <agent token>"');
    expect(err.headers["www-authenticate"]).toContain("Bearer");
    expect(api.agentInfoRequests).toBe(0);
  });

  test.each([
    ["an unknown token", undefined, 401, "agent token is invalid or revoked"],
    ["a refused token", 403, 403, "GitLab refused the agent token"],
    ["a deleted agent", 404, 404, "agent not found"],
  ] as const)(
    "%s: HTTP %s from GitLab refuses the handshake with %i",
    async (_, refusalStatus, status, message) => {
      const { api, server, logs } = await startKas();
      const token = refusalStatus === undefined ? "glagent-unknownUnknown1234" : TOKEN;
      if (refusalStatus !== undefined) api.refuse(TOKEN, refusalStatus);
      const err = await refusal(server.url, { Authorization: `Bearer ${token}` });
      expect(err.status).toBe(status);
      expect(err.body).toContain(message);
      expect(err.body).not.toContain(token);
      expect(logs()).toContain('"msg":"agent refused"');
      expect(logs()).not.toContain(token);
    },
  );

  test("GitLab failing: 503 with Retry-After, the attempts logged without the token", async () => {
    const { api, server, logs } = await startKas();
    api.failNext({ status: 500 }, { status: 500 });
    const err = await refusal(server.url, { Authorization: `Bearer ${TOKEN}` });
    expect(err.status).toBe(503);
    expect(err.headers["retry-after"]).toBe("5");
    expect(err.body).toContain("GitLab answered HTTP 500");
    expect(api.agentInfoRequests).toBe(2);
    expect(logs()).toContain("agent authentication unavailable");
    expect(logs()).toContain("tokenFingerprint");
    expect(logs()).not.toContain(TOKEN);
    // Not cached: GitLab is back, the agent gets in.
    const conn = await dial(server.url, { headers: { Authorization: `Bearer ${TOKEN}` } });
    conn.close();
  });
});
