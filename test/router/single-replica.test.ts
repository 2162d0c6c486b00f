import { once } from "node:events";
import { afterAll, describe, expect, it } from "vitest";
import { NoTunnelError, Router } from "../../lib/router/index.ts";
import { Kind, StreamDispatcher } from "../../lib/tunnel/header/index.ts";
import { TunnelClient, type TunnelServer } from "../../lib/tunnel/session/index.ts";
import { ask, serveAgents } from "./harness.ts";

// Without `redis` the router is single-replica: local tunnels only, no private API to listen on.
describe("single-replica router (no Redis)", () => {
  const clients: TunnelClient[] = [];
  let started: Promise<{ router: Router; agents: TunnelServer<string> }> | undefined;
  /**
   * The router and its agent listener, started by the first test that needs them. Not in
   * `beforeAll`: there a `start` that throws would only mark the tests skipped.
   */
  const setup = () => {
    started ??= (async () => {
      const router = await new Router({ defaultTimeoutMs: 2000 }).start();
      return { router, agents: await serveAgents(router) };
    })();
    return started;
  };

  const agent = (agents: TunnelServer<string>, agentId: string) => {
    const dispatcher = new StreamDispatcher();
    dispatcher.register(Kind.KIND_HTTP, (stream) => {
      stream.on("error", () => {});
      stream.write(`${agentId}\n`);
      stream.pipe(stream);
    });
    const client = new TunnelClient({
      url: agents.url,
      dial: { headers: { "x-agent-id": agentId } },
      backoff: { initialMs: 50, maxMs: 200 },
      onStream: (stream) => void dispatcher.handle(stream, undefined),
    }).start();
    clients.push(client);
    return client;
  };

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close(200)));
    const s = await started?.catch(() => undefined);
    await s?.router.close(200);
    await s?.agents.close(200);
  });

  it("has no private API and no cluster registry", async () => {
    const { router } = await setup();
    expect(router.clustered).toBe(false);
    expect(() => router.privateUrl).toThrow(/single-replica/);
    expect(() => router.cluster).toThrow(/single-replica/);
    expect(router.peerTunnels).toBe(0);
  });

  it("routes to a local tunnel", async () => {
    const { router, agents } = await setup();
    await agent(agents, "7").ready(5000);
    expect(await ask(router, "7", "hello")).toBe("7\nhello");
  });

  it("a waiting dial is served as soon as the agent connects", async () => {
    const { router, agents } = await setup();
    const pending = ask(router, "8", "late", 3000);
    const client = agent(agents, "8");
    await once(client, "connected");
    expect(await pending).toBe("8\nlate");
  });

  it("fails with NoTunnelError at the deadline when the agent never connects", async () => {
    const { router } = await setup();
    const start = Date.now();
    const err = await ask(router, "999", "x", 300).catch((e) => e);
    expect(err).toBeInstanceOf(NoTunnelError);
    expect(err.agentId).toBe("999");
    expect(Date.now() - start).toBeGreaterThanOrEqual(290);
  });

  it("refuses redis without a private API", () => {
    expect(() => new Router({ redis: { server: { host: "127.0.0.1", port: 1 } } })).toThrow(/privateApi/);
  });
});
