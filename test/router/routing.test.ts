import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NoTunnelError } from "../../lib/router/index.ts";
import { Kind, RejectCode, StreamRejectedError } from "../../lib/tunnel/header/index.ts";
import type { TunnelClient } from "../../lib/tunnel/session/index.ts";
import { RedisServer } from "../support/redis-server.ts";
import { ask, type Replica, startAgent, startReplica } from "./harness.ts";

describe("routing across replicas", () => {
  let redis: RedisServer;
  let replicas: Replica[];
  let a: Replica;
  let b: Replica;
  let c: Replica;
  const agents: TunnelClient[] = [];
  const agent = (r: Replica, id: string, onStream?: Parameters<typeof startAgent>[2]) => {
    const client = startAgent(r, id, onStream);
    agents.push(client);
    return client;
  };

  beforeAll(async () => {
    redis = await RedisServer.start();
    replicas = await Promise.all(["a", "b", "c"].map((n) => startReplica(n, redis)));
    [a, b, c] = replicas as [Replica, Replica, Replica];
  });
  afterAll(async () => {
    await Promise.all(agents.map((x) => x.close(200)));
    await Promise.all(replicas.map((r) => r.close()));
    await redis.close();
  });

  it("a request at any replica reaches the right agent, through a peer when needed", async () => {
    const ids = ["101", "102", "103", "104", "105", "106"];
    const clients = ids.map((id, i) => agent(replicas[i % 3]!, id));
    await Promise.all(clients.map((x) => x.ready(5000)));
    for (const r of replicas) {
      for (const id of ids) expect(await ask(r.router, id, `hello ${id}`)).toBe(`${id}\nhello ${id}`);
    }
    for (const r of replicas) expect(r.router.peerTunnels).toBe(2); // one pooled tunnel per peer
    expect(a.router.local.agentIds().sort()).toEqual(["101", "104"]);
  });

  it("a waiting request is served as soon as the agent connects to another replica", async () => {
    const pending = ask(b.router, "201", "late", 3000);
    await b.router.cluster.lookup("201"); // queued behind the request's own lookup: it is waiting now
    const client = agent(a, "201");
    await once(client, "connected");
    const connectedAt = Date.now();
    expect(await pending).toBe("201\nlate");
    expect(Date.now() - connectedAt).toBeLessThan(500);
  });

  it("fails with NoTunnelError naming the agent at the deadline", async () => {
    const start = Date.now();
    const err = await ask(c.router, "999", "x", 300).catch((e) => e);
    expect(err).toBeInstanceOf(NoTunnelError);
    expect(err.code).toBe("NO_TUNNEL");
    expect(err.agentId).toBe("999");
    expect(Date.now() - start).toBeGreaterThanOrEqual(290);
    expect(Date.now() - start).toBeLessThan(1500);
  });

  it("passes the agent's own refusal through a peer at once, without waiting", async () => {
    const client = agent(a, "301");
    await client.ready(5000);
    const start = Date.now();
    const err = await b.router
      .dial("301", { kind: Kind.KIND_GRPC, service: "x" }, { deadline: Date.now() + 3000 })
      .catch((e) => e);
    expect(err).toBeInstanceOf(StreamRejectedError);
    expect(err.code).toBe(RejectCode.REJECT_CODE_UNKNOWN_KIND);
    expect(Date.now() - start).toBeLessThan(1000);
  });

  it("a reset by the caller reaches the agent across the peer hop, and end travels both ways", async () => {
    const agentSide: Array<Promise<{ ended: boolean }>> = [];
    const client = agent(c, "401", (s) => {
      agentSide.push(new Promise((resolve) => s.once("close", () => resolve({ ended: s.readableEnded }))));
    });
    await client.ready(5000);
    expect(await ask(a.router, "401", "clean")).toBe("401\nclean"); // end both ways, then close
    expect(await agentSide[0]).toEqual({ ended: true });

    const stream = await a.router.dial("401", { kind: Kind.KIND_HTTP }, { deadline: Date.now() + 2000 });
    stream.on("error", () => {});
    await once(stream, "readable");
    stream.destroy();
    expect(await agentSide[1]).toEqual({ ended: false }); // reset, not a clean end
  });

  it("requests follow an agent that moves from one replica to another within 1 s", async () => {
    const onA = agent(a, "501");
    await onA.ready(5000);
    expect(await ask(b.router, "501", "before")).toBe("501\nbefore");
    await onA.close(200); // its tunnel on A closes
    const pendingAtB = ask(b.router, "501", "during", 3000);
    const pendingAtA = ask(a.router, "501", "during", 3000);
    const onC = agent(c, "501");
    await once(onC, "connected");
    const connectedAt = Date.now();
    expect(await pendingAtB).toBe("501\nduring");
    expect(await pendingAtA).toBe("501\nduring");
    expect(Date.now() - connectedAt).toBeLessThan(1000);
    expect(c.router.local.usable("501")).toBe(true);
    expect(a.router.local.usable("501")).toBe(false);
  });
});
