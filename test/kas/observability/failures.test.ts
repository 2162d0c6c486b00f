import { once } from "node:events";
import { createServer, type ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Kind, openWithHeader } from "../../../lib/tunnel/index.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { until } from "../../support/until.ts";
import { memoryLogger } from "../auth/helpers.ts";
import { AGENT_ID, gitlabJwt, TOKEN } from "../support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../support/in-process.ts";

// Issue 10, item 5: failures after a response or a stream got going were swallowed and counted as success.
describe("failures midway are logged and counted (in-process kas and agentk)", () => {
  let kas: InProcessKas;
  let agent: InProcessAgentk;
  let logs: ReturnType<typeof memoryLogger>;
  const held: ServerResponse[] = [];
  const SERVICE_ROUTE = "/api/v1/agents/{agent_id}/services/{name}/*";

  beforeAll(async () => {
    logs = memoryLogger();
    kas = await startInProcessKas(() => {}, { log: logs.log });
    // Headers and a first chunk; what happens next is up to the test.
    const prometheus = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("first\n");
      held.push(res);
    });
    agent = await startInProcessAgentk({
      kasUrl: kas.addresses.agent,
      token: TOKEN,
      services: { prometheus },
    });
    await agent.agent.client.ready(5000);
  });
  afterAll(async () => {
    for (const res of held) res.destroy();
    await agent.stop();
    await kas.close();
  });

  const requests = async (status: string) => {
    const text = await kas.kas.metrics.registry.metrics();
    const line = `kas_request_duration_seconds_count{route="${SERVICE_ROUTE}",status="${status}"} `;
    return Number(
      text
        .split("\n")
        .find((l) => l.startsWith(line))
        ?.slice(line.length) ?? 0,
    );
  };
  const lines = () =>
    logs
      .text()
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l) as Record<string, unknown> & { err?: { message?: string } });
  const get = async (path: string, signal?: AbortSignal) =>
    fetch(`${kas.addresses.api}/api/v1/agents/${AGENT_ID}/services/prometheus${path}`, {
      headers: { "gitlab-kas-api-request": await gitlabJwt(kas.apiSecret) },
      ...(signal && { signal }),
    });

  it("the agent's service dies mid-response: the client's body fails, the metrics say aborted, not 200, and kas logs why", async () => {
    const res = await get("/dies");
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    expect(Buffer.from((await reader.read()).value!).toString()).toBe("first\n");
    held.at(-1)!.socket!.destroy(); // the service's process dies
    await expect(reader.read()).rejects.toThrow();
    await until(async () => (await requests("aborted")) === 1, 5000, "aborted request counted");
    expect(await requests("200")).toBe(0);
    const line = lines().find((l) => l.msg === "response failed midway");
    expect(line).toMatchObject({ level: 50, front: "api", method: "GET", route: SERVICE_ROUTE });
    expect(line?.err?.message).toMatch(/^response from agent 42's service prometheus failed midway: /);
  });

  it("the client leaving mid-response is a 499, not a failure of kas", async () => {
    const leave = new AbortController();
    const res = await get("/held", leave.signal);
    const reader = res.body!.getReader();
    expect(Buffer.from((await reader.read()).value!).toString()).toBe("first\n");
    const logged = lines().length;
    leave.abort();
    await until(async () => (await requests("499")) === 1, 5000, "client-gone request counted");
    expect(await requests("200")).toBe(0);
    expect(
      lines()
        .slice(logged)
        .filter((l) => (l.level as number) >= 50),
    ).toEqual([]);
  });

  it("a handler for streams agents open fails: logged with the agent and stream kind, and counted", async () => {
    // A module's stream kind (kas serves GRPC itself; agents open no HTTP streams toward kas).
    kas.kas.agentStreams.register(Kind.KIND_HTTP, async (stream) => {
      await once(stream, "data");
      throw new Error("module bug");
    });
    const session = agent.agent.client.active!;
    const stream = await openWithHeader(() => session.open(), { kind: Kind.KIND_HTTP });
    stream.on("error", () => {});
    stream.write("hello");
    // The dispatcher destroys the stream of a failed handler: the agent sees it closed.
    await new Promise((resolve) => stream.once("close", resolve).resume());
    await until(() => lines().some((l) => l.msg === "agent stream handler failed"), 5000, "log line");
    expect(lines().find((l) => l.msg === "agent stream handler failed")).toMatchObject({
      level: 50,
      agentId: AGENT_ID,
      kind: "HTTP",
      err: { message: "module bug" },
    });
    expect(await kas.kas.metrics.registry.metrics()).toContain(
      'kas_agent_stream_handler_errors_total{kind="HTTP"} 1',
    );
  });
});
