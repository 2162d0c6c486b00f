// What one simulated agent says to kas over its tunnel when its modules are on, as agentk's modules
// say it (modules/*/agentk): one grpc-js channel over `grpc` streams of the tunnel (agentk's kasRpc)
// and, on it, the generated clients' calls: agent_configuration's GetConfiguration stream,
// agent_tracker's ReportAgent, cluster_views' PushViews stream (a snapshot, then idle) and gitops'
// GetObjectsToSynchronize stream. The agent side is cheap (no informers, no applier); kas sees what
// it sees from agentk. As agentk, an agent that reconnects says which commits it has (AgentHas):
// kas then sends its configuration and manifests only if they moved.
import * as grpc from "@grpc/grpc-js";
import { createTunnelChannel, Kind, openWithHeader, type TunnelSession } from "../../lib/tunnel/index.ts";
import type { ClusterViews } from "../../modules/cluster_views/views.ts";
import { AgentConfigurationServiceClient } from "../../proto/gen/agent_configuration/v1/agent_configuration.ts";
import { AgentTrackerServiceClient } from "../../proto/gen/agent_tracker/v1/agent_tracker.ts";
import { ClusterViewsServiceClient } from "../../proto/gen/cluster_views/v1/cluster_views.ts";
import {
  type GetObjectsToSynchronizeResponse,
  GitopsServiceClient,
} from "../../proto/gen/gitops/v1/gitops.ts";

/** In the order the breakdown adds them. */
export const MODULES = ["configuration", "tracker", "views", "gitops"] as const;
export type ModuleName = (typeof MODULES)[number];

/** `--modules`: "" or "none" (tunnels only), "all", or a comma list of MODULES. */
export function parseModules(text: string): ModuleName[] {
  if (text === "" || text === "none") return [];
  if (text === "all") return [...MODULES];
  const names = text.split(",").map((s) => s.trim());
  for (const n of names) {
    if (!(MODULES as readonly string[]).includes(n)) {
      throw new Error(
        `--modules: unknown module ${JSON.stringify(n)}; known: ${MODULES.join(", ")}, all, none`,
      );
    }
  }
  return MODULES.filter((m) => names.includes(m));
}

/** The GitOps manifest project every agent's entry names (its repository differs by agent group). */
export const MANIFEST_PROJECT = "bench/manifests";

/** What agentk's pusher sends for a small cluster: 3 nodes, 3 namespaces, 4 rollouts, no warnings. */
const VIEWS: ClusterViews = {
  nodes: {
    total: 3,
    ready: 3,
    capacity: { cpuMillis: 12_000, memoryBytes: 48 * 2 ** 30 },
    allocatable: { cpuMillis: 11_400, memoryBytes: 45 * 2 ** 30 },
  },
  pods: {
    namespaces: Object.fromEntries(
      ["default", "kube-system", "gitlab-agent"].map((ns, i) => [
        ns,
        { phases: { Pending: 0, Running: 4 + i, Succeeded: 0, Failed: 0, Unknown: 0 }, restarts: i },
      ]),
    ),
  },
  workloads: {
    rollouts: ["web", "api", "worker", "agentk"].map((name) => ({
      kind: "Deployment" as const,
      namespace: "default",
      name,
      desired: 2,
      updated: 2,
      ready: 2,
      available: 2,
      state: "complete" as const,
    })),
    total: 4,
  },
  warnings: { latest: [] },
};

/**
 * The commits an agent has, kept across its tunnels as agentk keeps them: the configuration's and
 * the GitOps manifests' it last received ("" for none). Each stream's request carries them, so kas
 * sends nothing to an agent that reconnects with what is current.
 */
export interface AgentHas {
  configuration: string;
  gitops: string;
}

export interface AgentModules {
  /** Resolves once every module's first exchange is done (configuration, report answered, snapshot sent, manifests). */
  ready: Promise<void>;
  /** Ends every call and the channel. */
  close(): void;
}

/** As agentk's modules follow their streams: a module whose first exchange failed starts again on its own. */
export interface ModuleRetry {
  /** The first delay, doubled after each failure in a row up to `maxMs`, with +-20 % jitter. */
  firstMs: number;
  maxMs: number;
  /** Each failed attempt, before its retry. */
  onFailure(err: Error): void;
}

/**
 * Starts `modules` for one agent over `session`. Without `retry`, a module's error rejects
 * `ready`; with it, only that module starts again after a delay, and `ready` waits for every
 * module's first exchange. `timeoutMs` bounds the unary call (the load process's own deadline for
 * every module: a loaded machine takes minutes). `has`: what the agent kept from earlier tunnels
 * (updated as commits arrive); a stream for which it has a commit counts as up once opened, since
 * kas sends nothing on it until that commit moves.
 */
export function startAgentModules(
  session: TunnelSession,
  modules: readonly ModuleName[],
  timeoutMs = 60_000,
  retry?: ModuleRetry,
  has: AgentHas = { configuration: "", gitops: "" },
): AgentModules {
  const channel = createTunnelChannel(
    (signal) => openWithHeader(() => session.open(), { kind: Kind.KIND_GRPC }, { signal, timeoutMs: 60_000 }),
    { label: "kas" },
  );
  const options = { channelOverride: channel };
  const insecure = grpc.credentials.createInsecure();
  const waitForReady = () => new grpc.Metadata({ waitForReady: true });
  const calls: Array<{ cancel(): void }> = [];
  const firsts: Array<Promise<void>> = [];
  const failed = (what: string, reject: (e: Error) => void) => (err: grpc.ServiceError) =>
    reject(new Error(`${what}: ${err.code} ${err.details}`));

  let closed = false;
  /** Retries waiting for their delay: close() ends the wait at once. */
  const waits = new Map<NodeJS.Timeout, () => void>();
  const attempt = (m: ModuleName): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      switch (m) {
        case "configuration": {
          const call = new AgentConfigurationServiceClient("kas", insecure, options).getConfiguration(
            { commitId: has.configuration },
            waitForReady(),
          );
          call.on("data", (c: { commitId: string }) => {
            has.configuration = c.commitId;
            resolve();
          });
          call.on("error", failed(m, reject));
          calls.push(call);
          if (has.configuration !== "") resolve();
          return;
        }
        case "tracker": {
          const client = new AgentTrackerServiceClient("kas", insecure, options);
          const agentMeta = {
            version: "0.1.0",
            commitId: "",
            podNamespace: "gitlab-agent",
            podName: "agentk-0",
            kubernetesVersion: { major: "1", minor: "31", gitVersion: "v1.31.0", platform: "linux/amd64" },
          };
          client.reportAgent({ agentMeta }, waitForReady(), { deadline: Date.now() + timeoutMs }, (err) =>
            err ? failed(m, reject)(err) : resolve(),
          );
          return;
        }
        case "views": {
          const call = new ClusterViewsServiceClient("kas", insecure, options).pushViews(
            waitForReady(),
            (err) => {
              if (err) failed(m, reject)(err);
            },
          );
          // As the pusher: kas's headers say the stream is up; the snapshot goes then, and the
          // stream stays open (idle) until something changes.
          call.once("metadata", () => {
            call.write({ epoch: "bench", seq: "1", snapshot: true, viewsJson: JSON.stringify(VIEWS) }, () =>
              resolve(),
            );
          });
          calls.push(call);
          return;
        }
        case "gitops": {
          const call = new GitopsServiceClient("kas", insecure, options).getObjectsToSynchronize(
            {
              projectId: MANIFEST_PROJECT,
              commitId: has.gitops,
              paths: [{ glob: "manifests/**/*.yaml" }],
              ref: undefined,
            },
            waitForReady(),
          );
          let commit = "";
          call.on("data", (r: GetObjectsToSynchronizeResponse) => {
            if (r.header) commit = r.header.commitId;
            if (r.trailer) {
              has.gitops = commit; // applied, as agentk's applier reports it
              resolve();
            }
          });
          call.on("error", failed(m, reject));
          calls.push(call);
          if (has.gitops !== "") resolve();
          return;
        }
      }
    });
  /** `m` until its first exchange succeeds: retried after each failure when `retry` is given. */
  const follow = async (m: ModuleName): Promise<void> => {
    for (let failures = 0; ; failures++) {
      try {
        return await attempt(m);
      } catch (err) {
        if (!retry || closed) throw err;
        retry.onFailure(err as Error);
        const delay = Math.min(retry.maxMs, retry.firstMs * 2 ** failures) * (0.8 + 0.4 * Math.random());
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            waits.delete(timer);
            resolve();
          }, delay);
          waits.set(timer, resolve);
        });
        if (closed) throw err;
      }
    }
  };
  for (const m of modules) firsts.push(follow(m));
  return {
    ready: Promise.all(firsts).then(() => {}),
    close() {
      closed = true;
      for (const [timer, wake] of waits) {
        clearTimeout(timer);
        wake();
      }
      for (const c of calls) c.cancel();
      channel.close();
    },
  };
}
