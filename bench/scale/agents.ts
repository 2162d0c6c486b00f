// The load process: holds one idle tunnel per agent token to kas's agent listener, as agentk would
// (one WebSocket, a yamux session over it, keepalive as the plan says), and nothing else.
// Prints an AgentsReport line once all are up; closes every tunnel and exits on SIGTERM or when
// stdin ends (the runner went away).
import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { createTunnelChannel, dial, Kind, openWithHeader, TunnelSession } from "../../lib/tunnel/index.ts";
import {
  AgentConfigurationServiceClient,
  type GetConfigurationResponse,
} from "../../proto/gen/agent_configuration/v1/agent_configuration.ts";
import type { AgentsPlan, AgentsReport } from "./protocol.ts";

const plan = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as AgentsPlan;
const ATTEMPTS = 5;
const sessions: TunnelSession[] = [];
const calls: Array<{ cancel(): void }> = [];
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
if (plan.configurationStreamsTimeoutMs !== undefined && failed === 0) {
  Object.assign(report, await openConfigurationStreams(sessions, plan.configurationStreamsTimeoutMs));
}
process.stdout.write(`${JSON.stringify(report)}\n`);

/**
 * As agentk's agent_configuration module does, per tunnel: a grpc-js channel whose HTTP/2
 * connection runs over a `grpc` stream (cmd/agentk/agent.ts uses tunnelClientChannel on its
 * reconnecting client; here the tunnel is one fixed session), and one GetConfiguration stream kept
 * open on it. Resolves once every agent got its first configuration, or at the deadline.
 */
async function openConfigurationStreams(
  all: TunnelSession[],
  timeoutMs: number,
): Promise<Pick<AgentsReport, "configured" | "configuredSeconds" | "configurationError">> {
  const t0 = performance.now();
  let configured = 0;
  let error: string | undefined;
  let done!: () => void;
  const allIn = new Promise<void>((resolve) => {
    done = resolve;
  });
  for (const session of all) {
    const channel = createTunnelChannel(
      (signal) =>
        openWithHeader(() => session.open(), { kind: Kind.KIND_GRPC }, { signal, timeoutMs: 60_000 }),
      { label: "kas" },
    );
    const client = new AgentConfigurationServiceClient("kas", grpc.credentials.createInsecure(), {
      channelOverride: channel,
    });
    const call = client.getConfiguration({ commitId: "" }, new grpc.Metadata({ waitForReady: true }));
    let first = true;
    call.on("data", (_m: GetConfigurationResponse) => {
      if (!first) return;
      first = false;
      if (++configured === all.length) done();
    });
    call.on("error", (err: grpc.ServiceError) => {
      if (!stopping) error ??= `${err.code} ${err.details}`;
    });
    calls.push(call);
  }
  const timer = setTimeout(done, timeoutMs);
  await allIn;
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
  for (const call of calls) call.cancel();
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
