// The load process: holds one idle tunnel per agent token to kas's agent listener, as agentk would
// (one WebSocket, a yamux session over it, keepalive as the plan says) and, when the plan names
// modules, what those modules of agentk say over it (agent-modules.ts).
// Prints an AgentsReport line once all are up; leaves cleanly (GoAway, then close) and exits on
// SIGTERM or when stdin ends (the runner went away). SIGKILL is the runner's way to cut them.
import { readFileSync } from "node:fs";
import { dial, TunnelSession } from "../../lib/tunnel/index.ts";
import { type AgentModules, type ModuleName, startAgentModules } from "./agent-modules.ts";
import type { AgentsPlan, AgentsReport } from "./protocol.ts";

const plan = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as AgentsPlan;
const ATTEMPTS = 5;
const sessions: TunnelSession[] = [];
const agentModules: AgentModules[] = [];
let stopping = false;
let failed = 0;
let firstError: string | undefined;

async function connect(token: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      const conn = await dial(plan.url, { headers: { authorization: `Bearer ${token}` }, proxy: false });
      sessions.push(new TunnelSession(conn, "client", { keepAliveIntervalMs: plan.keepAliveIntervalMs }));
      return;
    } catch (err) {
      if (attempt === ATTEMPTS) {
        failed++;
        firstError ??= (err as Error).message;
        return;
      }
      await new Promise((r) => setTimeout(r, 100 * attempt));
    }
  }
}

const started = performance.now();
let next = 0;
const worker = async () => {
  while (next < plan.tokens.length) await connect(plan.tokens[next++]!);
};
await Promise.all(Array.from({ length: plan.concurrency }, worker));
const report: AgentsReport = {
  connected: sessions.length,
  failed,
  ...(firstError && { error: firstError }),
  seconds: (performance.now() - started) / 1000,
};
if (plan.modules && plan.modules.length > 0 && failed === 0) {
  Object.assign(report, await startModules(sessions, plan.modules, plan.modulesTimeoutMs ?? 300_000));
}
process.stdout.write(`${JSON.stringify(report)}\n`);

/**
 * Every agent's modules (agent-modules.ts), as agentk starts them once its tunnel is up. Resolves
 * once every agent's modules had their first exchange with kas, or at the deadline.
 */
async function startModules(
  all: TunnelSession[],
  modules: ModuleName[],
  timeoutMs: number,
): Promise<Pick<AgentsReport, "configured" | "configuredSeconds" | "configurationError">> {
  const t0 = performance.now();
  let configured = 0;
  let error: string | undefined;
  const each = all.map((session) => {
    const m = startAgentModules(session, modules, timeoutMs);
    agentModules.push(m);
    return m.ready.then(
      () => void configured++,
      (err: Error) => {
        if (!stopping) error ??= err.message;
      },
    );
  });
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all(each),
    new Promise((r) => {
      timer = setTimeout(r, timeoutMs);
    }),
  ]);
  clearTimeout(timer);
  return {
    configured,
    configuredSeconds: (performance.now() - t0) / 1000,
    ...(error && { configurationError: error }),
  };
}

function stop(): void {
  if (stopping) return;
  stopping = true;
  for (const m of agentModules) m.close();
  const open = sessions.filter((s) => !s.closed);
  let left = open.length;
  if (left === 0) process.exit(0);
  for (const s of open) {
    s.once("close", () => {
      if (--left === 0) process.exit(0);
    });
    // A clean leave, as agentk's shutdown: GoAway, the streams in flight end, then close.
    void s.close(3_000);
  }
  setTimeout(() => process.exit(0), 5_000).unref(); // deadline: whatever did not close in time is cut
}
process.once("SIGTERM", stop);
process.stdin.once("end", stop).resume();
