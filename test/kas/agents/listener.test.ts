import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Registry } from "prom-client";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type AgentListenerOptions, type AgentSession, serveAgents } from "../../../cmd/kas/agents/index.ts";
import { createAgentAuthenticate, loadStaticTokens } from "../../../cmd/kas/auth/index.ts";
import { TunnelMetrics } from "../../../cmd/kas/observability/index.ts";
import { Router } from "../../../lib/router/index.ts";
import {
  HandshakeError,
  Kind,
  openWithHeader,
  StreamDispatcher,
  StreamRejectedError,
  TunnelClient,
} from "../../../lib/tunnel/index.ts";
import { AgentTracker } from "../../../modules/agent_tracker/kas/tracker.ts";
import { OTHER_TOKEN, TOKEN, writeFixtures } from "../support/fixtures.ts";

describe("agent listener", () => {
  let dir: string;
  let tokensFile: string;
  const cleanups: (() => unknown)[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "kas-agents-"));
    ({ tokensFile } = await writeFixtures(dir));
  });
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** A router and an agent listener of this test's own (static tokens), closed after it. */
  const serve = async (options: Partial<AgentListenerOptions> = {}) => {
    const router = await new Router({ defaultTimeoutMs: 1000 }).start();
    cleanups.push(() => router.close(0));
    const registry = new Registry();
    // Derived from the router's record of the tunnels, as kas does.
    const tracker = new AgentTracker(router);
    const metrics = new TunnelMetrics(registry, "t");
    router.local.on("added", (agentId, tunnel) => metrics.track(tunnel, agentId));
    const listener = await serveAgents({
      listen: { address: { host: "127.0.0.1", port: 0 } },
      authenticate: createAgentAuthenticate({ authenticator: await loadStaticTokens(tokensFile) }),
      router,
      tunnel: { keepAliveIntervalMs: 0 },
      ...options,
    });
    cleanups.push(() => listener.close(200));
    /** An agent's reconnecting client, stopped after the test. */
    const connect = (token: string) => {
      const client = new TunnelClient({
        url: listener.url,
        dial: { headers: { authorization: `Bearer ${token}` }, proxy: false },
        tunnel: { keepAliveIntervalMs: 0 },
        backoff: { initialMs: 50, maxMs: 100 },
        onStream: (s) => s.destroy(),
      }).start();
      cleanups.push(() => client.close(0));
      return client;
    };
    return { router, registry, listener, tracker, connect };
  };

  it("registers each tunnel with the router under the agent id; lists agents with their tunnel count", async () => {
    const { router, registry, tracker, connect } = await serve();
    await Promise.all([
      connect(TOKEN).ready(5000),
      connect(TOKEN).ready(5000),
      connect(OTHER_TOKEN).ready(5000),
    ]);
    expect(router.local.agentIds().sort()).toEqual(["42", "43"]);
    expect(router.local.tunnels("42").size).toBe(2);
    expect((await tracker.connectedAgents()).map((a) => [a.agentId, a.tunnels])).toEqual([
      ["42", 2],
      ["43", 1],
    ]);
    expect((await tracker.connectedAgents({ projectId: "8" })).map((a) => a.agentId)).toEqual(["43"]);
    expect(tracker.localAgents({ agentId: "42" }).map((a) => a.tunnels)).toEqual([2]);
    expect(await registry.getSingleMetricAsString("t_connected_agents")).toMatch(/t_connected_agents 2$/);
    expect(await registry.getSingleMetricAsString("t_tunnels")).toMatch(/t_tunnels 3$/);
  });

  it("streams the agent opens go to the module registered for their kind; others are refused", async () => {
    // A later module's stream kind: agents open GRPC streams toward kas; here it records the service.
    const fromAgents: string[] = [];
    const dispatcher = new StreamDispatcher<AgentSession>();
    dispatcher.register(Kind.KIND_GRPC, (stream, header, session) => {
      fromAgents.push(`${session.identity.agentId}:${header.service}`);
      stream.end();
    });
    const { connect } = await serve({ dispatcher });
    const session = await connect(TOKEN).ready(5000);
    const stream = await openWithHeader(() => session.open(), { kind: Kind.KIND_GRPC, service: "gitops" });
    stream.resume();
    await once(stream, "end");
    expect(fromAgents).toEqual(["42:gitops"]);
    const refused = await openWithHeader(() => session.open(), { kind: Kind.KIND_HTTP, service: "x" }).catch(
      (e) => e,
    );
    expect(refused).toBeInstanceOf(StreamRejectedError);
  });

  it("a bad token is refused during the handshake with 401", async () => {
    const { router, connect } = await serve();
    const client = connect("wrong");
    const [info] = (await once(client, "retry")) as [{ error: Error }];
    expect(info.error).toBeInstanceOf(HandshakeError);
    expect((info.error as HandshakeError).status).toBe(401);
    expect(router.local.agentIds()).toEqual([]);
  });

  it("tunnels older than max_connection_age get GoAway; the agent reconnects at once", async () => {
    const { connect } = await serve({ maxConnectionAgeMs: 300, ageDrainGraceMs: 200 });
    const client = connect(OTHER_TOKEN);
    const first = await client.ready(5000);
    const [goaway] = await once(first, "goaway");
    expect(goaway).toBe(0);
    const [next] = await once(client, "connected");
    expect(next).not.toBe(first);
  });
});
