// openLocal over real tunnels (agents on loopback WebSockets, registered in a single-replica
// router's LocalRegistry): a tunnel that fails is skipped for the next, the agent's refusal and
// the caller's abort end the search.
import { afterAll, beforeAll, expect, test } from "vitest";
import { openLocal, Router } from "../../lib/router/index.ts";
import { Kind, StreamRejectedError } from "../../lib/tunnel/header/index.ts";
import { TunnelClient, type TunnelServer } from "../../lib/tunnel/session/index.ts";
import { until } from "../support/until.ts";
import { readAll, serveAgents, startAgent } from "./harness.ts";

let router: Router;
let agents: TunnelServer<string>;
const clients: TunnelClient[] = [];
const HTTP = { kind: Kind.KIND_HTTP, service: "echo" } as const;

beforeAll(async () => {
  router = await new Router({}).start();
  agents = await serveAgents(router);
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close(0)));
  await router.close(0);
  await agents.close(0);
});

/** An agent whose streams go to `onStream` (no header verdict unless it gives one). */
async function rawAgent(agentId: string, onStream: (s: import("node:stream").Duplex) => void) {
  const client = new TunnelClient({
    url: agents.url,
    dial: { headers: { "x-agent-id": agentId } },
    onStream,
  }).start();
  clients.push(client);
  await client.ready(5000);
  await registered(agentId, 1);
  return client;
}

async function echoAgent(agentId: string, count: number) {
  const streams: unknown[] = [];
  const client = startAgent({ agents }, agentId, (s) => streams.push(s));
  clients.push(client);
  await client.ready(5000);
  await registered(agentId, count);
  return streams;
}

const registered = (agentId: string, n: number) =>
  until(() => router.local.tunnels(agentId).size === n, 5000, `${n} tunnel(s) for agent ${agentId}`);

test("no tunnel here: undefined, at once", async () => {
  expect(await openLocal(router.local, "none", HTTP, { timeoutMs: 1000 })).toBeUndefined();
});

test("opens a stream the agent accepted, positioned at its payload", async () => {
  const seen = await echoAgent("101", 1);
  const stream = await openLocal(router.local, "101", { ...HTTP, agentId: "101" }, { timeoutMs: 2000 });
  stream!.end("hi");
  expect((await readAll(stream!)).toString()).toBe("101\nhi");
  expect(seen).toHaveLength(1);
});

test("a tunnel that fails the open (stream reset, no verdict) is skipped for the next one", async () => {
  let resets = 0;
  await rawAgent("102", (s) => {
    resets++;
    s.destroy();
  });
  const seen = await echoAgent("102", 2);
  const stream = await openLocal(router.local, "102", HTTP, { timeoutMs: 2000 });
  stream!.end("x");
  expect((await readAll(stream!)).toString()).toBe("102\nx");
  expect(resets).toBe(1); // each tunnel tried once
  expect(seen).toHaveLength(1);
});

test("every tunnel failing: undefined once each was tried once", async () => {
  let resets = 0;
  await rawAgent("103", (s) => {
    resets++;
    s.destroy();
  });
  expect(await openLocal(router.local, "103", HTTP, { timeoutMs: 2000 })).toBeUndefined();
  expect(resets).toBe(1);
});

test("the agent's refusal is thrown, and no other tunnel is tried", async () => {
  const seen = await echoAgent("104", 1);
  await echoAgent("104", 2);
  // The echo agent serves HTTP only: a gRPC stream is refused by the first tunnel picked.
  const err = await openLocal(
    router.local,
    "104",
    { kind: Kind.KIND_GRPC, service: "x" },
    { timeoutMs: 2000 },
  ).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(StreamRejectedError);
  expect(seen).toHaveLength(0); // the refusal came before any handler ran
  const s = router.local.pick("104")!;
  expect(s.stats.openStreams).toBe(0);
});

test("the caller's abort is thrown, and no other tunnel is tried", async () => {
  const silent: unknown[] = [];
  await rawAgent("105", (s) => silent.push(s.on("error", () => {}))); // never answers the header
  const seen = await echoAgent("105", 2);
  const reason = new Error("caller gone");
  const ctl = new AbortController();
  const opening = openLocal(router.local, "105", HTTP, { signal: ctl.signal, timeoutMs: 5000 });
  await until(() => silent.length === 1, 5000, "the stream to the silent agent");
  ctl.abort(reason);
  await expect(opening).rejects.toBe(reason);
  expect(seen).toHaveLength(0);
});

test("a tunnel whose agent stays silent past the timeout is skipped for the next", async () => {
  const silent: unknown[] = [];
  await rawAgent("106", (s) => silent.push(s.on("error", () => {})));
  await echoAgent("106", 2);
  const stream = await openLocal(router.local, "106", HTTP, { timeoutMs: 200 });
  stream!.end("late");
  expect((await readAll(stream!)).toString()).toBe("106\nlate");
  expect(silent).toHaveLength(1);
});

test("a header no agent could accept is thrown at once, not taken for a failing tunnel", async () => {
  await echoAgent("107", 1);
  const err = await openLocal(router.local, "107", { ...HTTP, agentId: "12abc" }, { timeoutMs: 2000 }).catch(
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(TypeError);
});
