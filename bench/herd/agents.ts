// The herd's agents, in a process of their own: each one as agentk keeps its tunnel (TunnelClient:
// redial with agentk's backoff when the tunnel ends) and, on every new tunnel, starts its modules
// (bench/scale/agent-modules.ts: configuration stream, tracker report, views push, GitOps stream).
// An agent is "back" once its modules on the new tunnel had their first exchange with kas. As
// agentk, a reconnecting agent asks for its configuration and manifests with the commits it has,
// and kas sends them only if they moved: those two streams count as back once opened again.
// IPC with the runner (protocol.ts): "up" once every agent is back the first time; after "mark"
// (the runner is about to kill a replica) it times each agent that lost its tunnel until it is back;
// "report" answers with those times.
import { readFileSync } from "node:fs";
import { TunnelClient, type TunnelSession } from "../../lib/tunnel/index.ts";
import { type AgentHas, type AgentModules, startAgentModules } from "../scale/agent-modules.ts";
import type { AgentsMessage, AgentsPlan, HerdReport } from "./protocol.ts";

const plan = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as AgentsPlan;
const send = (m: AgentsMessage) => process.send!(m);
/** Modules that failed their first exchange start again after a delay doubling from 1 s to 30 s (agentk's modules back off too). */
const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 30_000;

interface Agent {
  client: TunnelClient;
  modules: AgentModules | undefined;
  /** The commits it has, kept across its tunnels: sent again when it reconnects, as agentk does. */
  has: AgentHas;
  /** Back on a tunnel with its modules ready. */
  up: boolean;
  /** When it lost its tunnel after the mark (ms, performance.now()), until it is back. */
  downSince: number | undefined;
  tunnelBackMs: number | undefined;
}

let mark: number | undefined;
let ups = 0;
const back: number[] = [];
const tunnelBack: number[] = [];
let moduleFailures = 0;
let firstError: string | undefined;
let lastError: string | undefined;

function startModules(agent: Agent, session: TunnelSession): void {
  agent.modules?.close();
  // As agentk: each module follows its own stream, and only a module that failed starts again.
  const m = startAgentModules(
    session,
    plan.modules,
    undefined,
    {
      firstMs: RETRY_FIRST_MS,
      maxMs: RETRY_MAX_MS,
      onFailure: (err) => {
        moduleFailures++;
        firstError ??= err.message;
        lastError = err.message;
      },
    },
    agent.has,
  );
  agent.modules = m;
  m.ready.then(
    () => {
      if (agent.modules !== m || agent.up) return;
      agent.up = true;
      ups++;
      if (agent.downSince !== undefined) {
        back.push(performance.now() - agent.downSince);
        if (agent.tunnelBackMs !== undefined) tunnelBack.push(agent.tunnelBackMs);
        agent.downSince = undefined;
        agent.tunnelBackMs = undefined;
      }
      if (ups === plan.tokens.length && mark === undefined) send({ up: ups });
    },
    () => {}, // closed with its tunnel: the next tunnel starts the modules again
  );
}

function agentFor(token: string, n: number): Agent {
  const client = new TunnelClient({
    url: plan.urls[(plan.firstIndex + n) % plan.urls.length]!,
    dial: { headers: { authorization: `Bearer ${token}` }, proxy: false },
    tunnel: { keepAliveIntervalMs: plan.keepAliveIntervalMs },
  });
  const agent: Agent = {
    client,
    modules: undefined,
    has: { configuration: "", gitops: "" },
    up: false,
    downSince: undefined,
    tunnelBackMs: undefined,
  };
  client.on("connected", (session) => {
    if (agent.downSince !== undefined) agent.tunnelBackMs = performance.now() - agent.downSince;
    startModules(agent, session);
  });
  client.on("disconnected", () => {
    agent.modules?.close();
    agent.modules = undefined;
    if (agent.up) {
      agent.up = false;
      ups--;
      if (mark !== undefined) agent.downSince = mark;
    }
  });
  // Redial errors are expected while a replica is gone; the runner reads the outcome, not each error.
  client.on("retry", () => {});
  return agent;
}

const agents: Agent[] = [];
// Progress on stderr (the runner shows it unless --json), so that a stall says where it is.
setInterval(() => {
  const tunnels = agents.filter((a) => a.client.active !== undefined).length;
  process.stderr.write(
    `  agents: ${ups}/${plan.tokens.length} up, ${tunnels} tunnels, ${moduleFailures} module failures${lastError ? ` (last: ${lastError})` : ""}\n`,
  );
}, 5000).unref();
// Dialed a batch at a time, as agents come up over time, not all in one instant.
for (let i = 0; i < plan.tokens.length; i += plan.concurrency) {
  const batch = plan.tokens.slice(i, i + plan.concurrency).map((token, j) => agentFor(token, i + j));
  agents.push(...batch);
  for (const a of batch) a.client.start();
  await Promise.all(batch.map((a) => a.client.ready(120_000).catch(() => undefined)));
}

process.on("message", (m: "mark" | "report") => {
  if (m === "mark") {
    mark = performance.now();
    return;
  }
  const report: HerdReport = {
    up: ups,
    lost: back.length + agents.filter((a) => a.downSince !== undefined).length,
    backMs: back,
    tunnelBackMs: tunnelBack,
    pending: agents.filter((a) => a.downSince !== undefined).length,
    moduleFailures,
    ...(firstError !== undefined && { firstError }),
  };
  send({ report });
});
process.on("disconnect", () => process.exit(0));
