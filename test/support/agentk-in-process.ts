// agentk in this process, built as the daemon builds it (its flags parsed by its own loader, its
// real modules), connected to a kas: the agentk half of every module, for tests of the kas half.

import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type RequestListener, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Agent, createAgent, type GitopsTuning } from "../../cmd/agentk/agent.ts";
import { loadAgentkConfig } from "../../cmd/agentk/config/index.ts";
import {
  createAgentkMetrics,
  createLogger,
  type Logger,
  ReadinessChecks,
} from "../../cmd/agentk/observability/index.ts";
import { type BackoffOptions, HandshakeError } from "../../lib/tunnel/index.ts";
import type { ClusterViewsAgentOptions } from "../../modules/cluster_views/agentk/module.ts";
import type { FluxAgentOptions } from "../../modules/flux/agentk/module.ts";
import type { AgentkModuleFactory } from "../../modules/runtime/index.ts";
import { writeKubeconfig } from "./kubeconfig.ts";

export interface InProcessAgentkOptions {
  /** kas's agent listener, ws://… */
  kasUrl: string;
  token: string;
  /** In-cluster HTTP services the agent allow-lists, by name: each is served on a loopback port. */
  services?: Record<string, RequestListener | Server>;
  /**
   * The Kubernetes API the agent serves as `kubernetes`: a kubeconfig file, or a plain-HTTP server
   * (served on a loopback port, with a kubeconfig of no credentials written for it). Default none.
   */
  kubernetes?: string | RequestListener | Server;
  /** POD_NAME and POD_NAMESPACE. Default name "agentk-test", no namespace. */
  pod?: { name?: string; namespace?: string };
  /** Default: silent. */
  log?: Logger;
  /** Default: 50 ms to 200 ms, for tests that reconnect. */
  backoff?: BackoffOptions;
  /** Modules of the test's own, run after agentk's. */
  modules?: AgentkModuleFactory[];
  /** GitOps timings (drift interval, readiness polling, stream back-off). Default: the daemon's. */
  gitops?: GitopsTuning;
  /** Cluster views' coalescing and back-off. Default: the daemon's. */
  clusterViews?: Omit<ClusterViewsAgentOptions, "kubeConfig">;
  /** How often agentk reads its cluster's version again. Default: the daemon's (10 minutes). */
  versionIntervalMs?: number;
  /** Flux's debounce and back-offs. Default: the daemon's. */
  flux?: Omit<FluxAgentOptions, "kubeConfig">;
}

export interface InProcessAgentk {
  agent: Agent;
  /** HTTP statuses of refused handshakes so far (0 for other failures to reach kas). */
  readonly rejected: number[];
  stop(graceMs?: number): Promise<void>;
}

export async function startInProcessAgentk(o: InProcessAgentkOptions): Promise<InProcessAgentk> {
  const upstreams = new Set<Server>();
  const serve = async (service: RequestListener | Server): Promise<string> => {
    const server = typeof service === "function" ? createServer(service) : service;
    if (upstreams.has(server)) return urlOf(server);
    // Upgraded connections are no longer the HTTP server's to close: tracked here to cut at stop.
    server.on("connection", (socket) => {
      sockets.add(socket);
      socket.once("close", () => sockets.delete(socket));
    });
    if (!server.listening) await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    upstreams.add(server);
    return urlOf(server);
  };
  const sockets = new Set<Socket>();
  let dir: string | undefined;
  const argv = [
    "--kas-address",
    o.kasUrl,
    "--observability-listen-address",
    "127.0.0.1:0",
    "--keepalive-interval",
    "0s",
  ];
  for (const [name, service] of Object.entries(o.services ?? {}))
    argv.push("--service", `${name}=${await serve(service)}`);
  if (typeof o.kubernetes === "string") argv.push("--kubeconfig", o.kubernetes);
  else if (o.kubernetes) {
    dir = await mkdtemp(join(tmpdir(), "agentk-inproc-"));
    argv.push(
      "--kubeconfig",
      await writeKubeconfig(join(dir, "kubeconfig"), {
        server: await serve(o.kubernetes),
        insecureSkipTlsVerify: true,
      }),
    );
  }
  const args = await loadAgentkConfig({
    argv,
    env: {
      AGENTK_TOKEN: o.token,
      POD_NAME: o.pod?.name ?? "agentk-test",
      ...(o.pod?.namespace && { POD_NAMESPACE: o.pod.namespace }),
    },
  });
  if (args.help) throw new Error("unexpected --help");
  const agent = createAgent(args.config, {
    // Its output is discarded: the agent configuration may raise the level (a file sets info).
    log: o.log ?? createLogger({ level: "silent", destination: { write: () => true } }),
    metrics: createAgentkMetrics(),
    readiness: new ReadinessChecks(),
    tuning: {
      backoff: o.backoff ?? { initialMs: 50, maxMs: 200 },
      ...(o.modules && { modules: o.modules }),
      ...(o.gitops && { gitops: o.gitops }),
      ...(o.clusterViews && { clusterViews: o.clusterViews }),
      ...(o.versionIntervalMs !== undefined && { versionIntervalMs: o.versionIntervalMs }),
      ...(o.flux && { flux: o.flux }),
    },
  });
  const rejected: number[] = [];
  agent.client.on("retry", ({ reason, error }) => {
    if (reason === "dial") rejected.push(error instanceof HandshakeError ? error.status : 0);
  });
  await agent.start();
  return {
    agent,
    rejected,
    async stop(graceMs = 200) {
      await agent.close(graceMs);
      for (const socket of sockets) socket.destroy();
      await Promise.all([...upstreams].map((s) => new Promise((resolve) => s.close(resolve))));
      if (dir) await rm(dir, { recursive: true, force: true });
    },
  };
}

function urlOf(server: Server): string {
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
