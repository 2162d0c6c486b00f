import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import type { AgentSession } from "../../../cmd/kas/agents/index.ts";
import { readKasSecrets } from "../../../cmd/kas/config/index.ts";
import { createKasServer, type KasServer } from "../../../cmd/kas/server.ts";
import type { TunnelSession } from "../../../lib/tunnel/index.ts";
import { startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { until } from "../../support/until.ts";
import { inProcessConfig } from "../support/fixtures.ts";
import { memoryLogger, startGitLab } from "./helpers.ts";

// kas re-checks the tokens of connected agents against GitLab when their cached authentication
// expires (agent.info_cache_ttl, 1 s here, the shortest re-check interval): a revoked token loses
// its tunnels then, not at max_connection_age.
const TOKENS = {
  "42": "glagent-Rv42aaaaBBBBccccDDDDeeee",
  "43": "glagent-Rv43ffffGGGGhhhhIIIIjjjj",
  "44": "glagent-Rv44kkkkLLLLmmmmNNNNoooo",
} as const;

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup() {
  const { api, secret } = await startGitLab(
    Object.fromEntries(
      Object.entries(TOKENS).map(([id, token]) => [
        token,
        { agentId: Number(id), projectId: 7, agentName: `agent-${id}` },
      ]),
    ),
  );
  const dir = await mkdtemp(join(tmpdir(), "kas-revocation-"));
  const secretFile = join(dir, "gitlab_secret");
  await writeFile(secretFile, Buffer.from(secret).toString("base64"));
  const config = inProcessConfig({
    gitlab: { address: api.url, authentication_secret_file: secretFile, retry_deadline: "2s" },
    agent: { info_cache_ttl: "1s", info_cache_error_ttl: "60s" },
  });
  const { log, text } = memoryLogger();
  const kas = createKasServer({
    config,
    secrets: await readKasSecrets(config),
    log,
    tuning: { tunnel: { keepAliveIntervalMs: 0 } },
  });
  const addresses = await kas.start();
  cleanups.push(
    () => rm(dir, { recursive: true, force: true }),
    () => kas.close(0),
    () => api.close(), // first: a request GitLab holds would keep kas's stop waiting
  );
  const connect = async (id: keyof typeof TOKENS) => {
    const agent = await startInProcessAgentk({ kasUrl: addresses.agent, token: TOKENS[id], services: {} });
    cleanups.push(() => agent.stop());
    const tunnel = await agent.agent.client.ready(5000);
    return { agent, tunnel };
  };
  return { api, kas, connect, log: text };
}

/** kas's count of token re-checks with this result. */
async function rechecks(kas: KasServer, result?: string): Promise<number> {
  const { values } = await kas.metrics.agentTokenRecheck.get();
  return values
    .filter((v) => result === undefined || v.labels.result === result)
    .reduce((n, v) => n + v.value, 0);
}

/** kas's ends of an agent's tunnels. */
function kasSessions(kas: KasServer, agentId: string): AgentSession[] {
  return [...kas.agents!.server.sessions].filter((s) => s.identity.agentId === agentId);
}

function closed(tunnel: TunnelSession) {
  return once(tunnel, "close", { signal: AbortSignal.timeout(5000) });
}

describe("kas re-checks connected agents' tokens", () => {
  test("a token GitLab now refuses (401, 403, 404): GoAway, the tunnel closed with the reason, the agent gone from the list, and refused on its way back", async () => {
    const { api, kas, connect, log } = await setup();
    const agents = await Promise.all((["42", "43", "44"] as const).map(connect));
    const atKas = agents.map((_, i) => kasSessions(kas, String(42 + i))[0]!);
    expect((await kas.tracker!.connectedAgents()).map((a) => a.agentId)).toEqual(["42", "43", "44"]);
    const goaways = agents.map(({ tunnel }) => once(tunnel, "goaway", { signal: AbortSignal.timeout(5000) }));
    const closes = agents.map(({ tunnel }) => closed(tunnel));
    api.removeAgent(TOKENS["42"]);
    api.refuse(TOKENS["43"], 403);
    api.refuse(TOKENS["44"], 404);

    expect(await Promise.all(goaways)).toEqual([[0], [0], [0]]);
    await Promise.all(closes);
    for (const session of atKas) {
      expect(session.closed).toBe(true);
      expect(session.closeError?.message).toMatch(/^agent token no longer valid: /);
    }
    expect(await kas.tracker!.connectedAgents()).toEqual([]);
    expect(kas.router!.local.agentIds()).toEqual([]);
    expect(await rechecks(kas, "unauthenticated")).toBe(1);
    expect(await rechecks(kas, "permission_denied")).toBe(1);
    expect(await rechecks(kas, "not_found")).toBe(1);
    const lines = log()
      .split("\n")
      .filter((l) => l.includes('"msg":"agent token no longer valid"'));
    expect(lines.map((l) => JSON.parse(l).agentId).sort()).toEqual(["42", "43", "44"]);
    for (const token of Object.values(TOKENS)) expect(log()).not.toContain(token);
    // The agents redial at once (GoAway) and are refused at the handshake from then on.
    for (const [i, status] of [401, 403, 404].entries()) {
      await until(() => agents[i]!.agent.rejected.includes(status), 5000, `agent ${42 + i} refused`);
    }
    expect(await kas.tracker!.connectedAgents()).toEqual([]);
  });

  test("GitLab failing (500) at the re-check is no refusal: the tunnel stays, and the next re-check succeeds", async () => {
    const { api, kas, connect, log } = await setup();
    const { agent, tunnel } = await connect("42");
    let goaway = false;
    tunnel.on("goaway", () => {
      goaway = true;
    });
    // Every attempt of the re-check (4 within gitlab.retry_deadline) gets a 500.
    api.failNext(...Array.from({ length: 4 }, () => ({ status: 500 })));
    await until(async () => (await rechecks(kas, "unavailable")) === 1, 5000, "the failed re-check");
    await until(async () => (await rechecks(kas, "ok")) === 1, 5000, "the next re-check");
    expect(api.requests.map((r) => r.status)).toEqual([200, 500, 500, 500, 500, 200]);
    expect(goaway).toBe(false);
    expect(tunnel.closed).toBe(false);
    expect(agent.agent.client.active).toBe(tunnel);
    expect(kasSessions(kas, "42").map((s) => s.closed)).toEqual([false]);
    expect(await kas.tracker!.connectedAgents()).toMatchObject([{ agentId: "42", tunnels: 1 }]);
    expect(log()).toContain('"msg":"agent token: re-check failed; its tunnels stay');
  });

  test("two tunnels of one agent share one re-check: one agent_info call per re-check", async () => {
    const { api, kas, connect } = await setup();
    const tunnels = [await connect("42"), await connect("42")];
    expect(kasSessions(kas, "42")).toHaveLength(2);
    expect(api.agentInfoRequests).toBe(1); // the second handshake was answered from the cache
    await api.waitForRequests(2);
    // GitLab holds the next call: a re-check per tunnel would show as two re-checks by then.
    api.failNext("hang");
    await api.waitForRequests(3);
    expect(await rechecks(kas)).toBe(1);
    expect(await rechecks(kas, "ok")).toBe(1);
    expect(api.requests.map((r) => r.agentToken)).toEqual([TOKENS["42"], TOKENS["42"], TOKENS["42"]]);
    expect(tunnels.map(({ tunnel }) => tunnel.closed)).toEqual([false, false]);
  });
});
