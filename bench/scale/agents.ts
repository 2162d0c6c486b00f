// The load process: holds one idle tunnel per agent token to kas's agent listener, as agentk would
// (one WebSocket, a yamux session over it, keepalive as the plan says), and nothing else.
// Prints an AgentsReport line once all are up; closes every tunnel and exits on SIGTERM or when
// stdin ends (the runner went away).
import { readFileSync } from "node:fs";
import { dial, TunnelSession } from "../../lib/tunnel/index.ts";
import type { AgentsPlan, AgentsReport } from "./protocol.ts";

const plan = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as AgentsPlan;
const ATTEMPTS = 5;
const sessions: TunnelSession[] = [];
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
process.stdout.write(`${JSON.stringify(report)}\n`);

let stopping = false;
function stop(): void {
  if (stopping) return;
  stopping = true;
  const open = sessions.filter((s) => !s.closed);
  let left = open.length;
  if (left === 0) process.exit(0);
  for (const s of open) {
    s.once("close", () => {
      if (--left === 0) process.exit(0);
    });
    s.destroy();
  }
  setTimeout(() => process.exit(0), 5_000).unref(); // deadline: whatever did not close in time is cut
}
process.once("SIGTERM", stop);
process.stdin.once("end", stop).resume();
