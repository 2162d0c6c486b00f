import { once } from "node:events";
import { createServer, type ServerResponse } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { TOKEN } from "../support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../support/in-process.ts";

// Graceful stop, in-process: what SIGTERM runs in the kas process.
describe("kas stop", () => {
  const watches: ServerResponse[] = [];
  // Serves only the pod watch the test makes; anything else agentk asks for itself (its leader
  // election's Lease) is not found.
  const cluster = createServer((req, res) => {
    if (!req.url?.startsWith("/api/v1/pods")) {
      res.writeHead(404, { "content-type": "application/json" }).end('{"kind":"Status","code":404}');
      return;
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.write('{"type":"ADDED"}\n');
    watches.push(res);
  });
  let kas: InProcessKas;
  let agent: InProcessAgentk;

  const start = async () => {
    kas = await startInProcessKas();
    agent = await startInProcessAgentk({ kasUrl: kas.addresses.agent, token: TOKEN, kubernetes: cluster });
    await agent.agent.client.ready(5000);
  };
  const watch = async () => {
    const res = await fetch(`${kas.addresses.kubernetesApi}/api/v1/pods?watch=true`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    const reader = res.body!.getReader();
    expect(Buffer.from((await reader.read()).value!).toString()).toBe('{"type":"ADDED"}\n');
    return reader;
  };
  const rest = async (reader: ReadableStreamDefaultReader<Uint8Array>) => {
    let text = "";
    for (let r = await reader.read(); !r.done; r = await reader.read())
      text += Buffer.from(r.value).toString();
    return text;
  };
  afterEach(async () => {
    await agent.stop();
    await kas.close();
  });

  it("not ready, no new connections, GoAway to the agent; a request in flight completes; then it stops", async () => {
    await start();
    const reader = await watch();
    const tunnel = agent.agent.client.active!;
    const goaway = once(tunnel, "goaway");
    const stopped = kas.kas.close(10_000);
    await goaway;
    const ready = await fetch(`${kas.addresses.observability}/readiness`);
    expect(ready.status).toBe(503);
    const { checks } = (await ready.json()) as { checks: { name: string; ok: boolean }[] };
    expect(checks.filter((c) => !c.ok)).toMatchObject([{ name: "shutdown", ok: false }]);
    await expect(fetch(`${kas.addresses.kubernetesApi}/api/v1/pods`)).rejects.toThrow();
    // The stream still carries data after GoAway, and stop() has not resolved by the time it arrives
    // (a stop that cut the stream, or did not wait for it, would win this race).
    watches[0]!.write('{"type":"MODIFIED"}\n');
    const first = await Promise.race([
      stopped.then(() => "stopped"),
      reader.read().then((r) => Buffer.from(r.value ?? []).toString()),
    ]);
    expect(first).toBe('{"type":"MODIFIED"}\n');
    watches.shift()!.end('{"type":"DELETED"}\n');
    expect(await rest(reader)).toBe('{"type":"DELETED"}\n');
    await stopped;
  });

  it("streams still open when the grace period ends are cut, and stop resolves", async () => {
    await start();
    const reader = await watch();
    const started = Date.now();
    await kas.kas.close(300);
    expect(Date.now() - started).toBeLessThan(5000);
    await expect(rest(reader)).rejects.toThrow();
    watches.shift()?.destroy();
  });
});
