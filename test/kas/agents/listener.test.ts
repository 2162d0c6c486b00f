import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentListener, type AgentSession, serveAgents } from "../../../cmd/kas/agents/index.ts";
import { createAgentAuthenticate, loadStaticTokens } from "../../../cmd/kas/auth/index.ts";
import { createRegistry, TunnelMetrics } from "../../../cmd/kas/observability/index.ts";
import { Router } from "../../../lib/router/index.ts";
import {
  HandshakeError,
  Kind,
  openWithHeader,
  StreamDispatcher,
  StreamRejectedError,
  TunnelClient,
} from "../../../lib/tunnel/index.ts";
import { OTHER_TOKEN, TOKEN, writeFixtures } from "../support/fixtures.ts";

describe("agent listener", () => {
  let dir: string;
  let tokensFile: string;
  let router: Router;
  let listener: AgentListener;
  const registry = createRegistry("t");
  const metrics = new TunnelMetrics(registry, "t");
  const clients: TunnelClient[] = [];
  const fromAgents: string[] = [];

  const connect = (token: string) => {
    const client = new TunnelClient({
      url: listener.url,
      dial: { headers: { authorization: `Bearer ${token}` }, proxy: false },
      tunnel: { keepAliveIntervalMs: 0 },
      backoff: { initialMs: 50, maxMs: 100 },
      onStream: (s) => s.destroy(),
    }).start();
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "kas-agents-"));
    ({ tokensFile } = await writeFixtures(dir));
    router = await new Router({ defaultTimeoutMs: 1000 }).start();
    // A later module's stream kind: agents open GRPC streams toward kas; here it records the service.
    const dispatcher = new StreamDispatcher<AgentSession>();
    dispatcher.register(Kind.KIND_GRPC, (stream, header, session) => {
      fromAgents.push(`${session.identity.agentId}:${header.service}`);
      stream.end();
    });
    listener = await serveAgents({
      listen: { address: { host: "127.0.0.1", port: 0 } },
      authenticate: createAgentAuthenticate({ authenticator: await loadStaticTokens(tokensFile) }),
      router,
      metrics,
      dispatcher,
      tunnel: { keepAliveIntervalMs: 0 },
    });
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.stop(100)));
    await listener.close(200);
    await router.close({ graceMs: 0 });
    await rm(dir, { recursive: true, force: true });
  });

  it("registers each tunnel with the router under the agent id; lists agents with their tunnel count", async () => {
    await Promise.all([
      connect(TOKEN).ready(5000),
      connect(TOKEN).ready(5000),
      connect(OTHER_TOKEN).ready(5000),
    ]);
    expect(router.local.agentIds().sort()).toEqual(["42", "43"]);
    expect(router.local.tunnels("42").size).toBe(2);
    expect((await listener.connectedAgents()).map((a) => [a.agentId, a.tunnels])).toEqual([
      ["42", 2],
      ["43", 1],
    ]);
    expect((await listener.connectedAgents({ projectId: "8" })).map((a) => a.agentId)).toEqual(["43"]);
    expect(listener.localAgents({ agentId: "42" }).map((a) => a.tunnels)).toEqual([2]);
    expect(await registry.getSingleMetricAsString("t_connected_agents")).toMatch(/t_connected_agents 2$/);
    expect(await registry.getSingleMetricAsString("t_tunnels")).toMatch(/t_tunnels 3$/);
  });

  it("streams the agent opens go to the module registered for their kind; others are refused", async () => {
    const client = clients[0]!;
    const session = await client.ready(5000);
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
    const client = connect("wrong");
    const [info] = (await once(client, "retry")) as [{ error: Error }];
    expect(info.error).toBeInstanceOf(HandshakeError);
    expect((info.error as HandshakeError).status).toBe(401);
    await client.stop(0);
  });

  it("tunnels older than max_connection_age get GoAway; the agent reconnects at once", async () => {
    const aged = await serveAgents({
      listen: { address: { host: "127.0.0.1", port: 0 } },
      authenticate: createAgentAuthenticate({ authenticator: await loadStaticTokens(tokensFile) }),
      router,
      maxConnectionAgeMs: 300,
      ageDrainGraceMs: 200,
      tunnel: { keepAliveIntervalMs: 0 },
    });
    const client = new TunnelClient({
      url: aged.url,
      dial: { headers: { authorization: `Bearer ${OTHER_TOKEN}` }, proxy: false },
      tunnel: { keepAliveIntervalMs: 0 },
      backoff: { initialMs: 50, maxMs: 100 },
    }).start();
    try {
      const first = await client.ready(5000);
      const [goaway] = await once(first, "goaway");
      expect(goaway).toBe(0);
      const [next] = await once(client, "connected");
      expect(next).not.toBe(first);
    } finally {
      await client.stop(0);
      await aged.close(0);
    }
  });
});
