// Agent tracking's agentk half: after each new tunnel, agentk tells kas who it is (its version and
// commit, its pod, its cluster's Kubernetes version) over the agent's gRPC channel; kas lists it
// with the agent. The cluster's version is read at start and every `versionIntervalMs` (clusters
// are upgraded under a running agent); a change is reported at once.
import * as grpc from "@grpc/grpc-js";
import type { KubeConfig } from "@kubernetes/client-node";
import type { TunnelSession } from "../../../lib/tunnel/index.ts";
import {
  type AgentMeta,
  AgentTrackerServiceClient,
} from "../../../proto/gen/agent_tracker/v1/agent_tracker.ts";
import { commitId, VERSION } from "../../../tool/version.ts";
import { type AgentkModuleFactory, Phase } from "../../runtime/index.ts";
import { readKubernetesVersion, sameVersion } from "./kubernetes-version.ts";

export interface AgentTrackerAgentConfig {
  pod: { name?: string; namespace?: string };
  /** agentk's Kubernetes configuration; undefined without a cluster (no version is reported then). */
  kubeConfig?: () => Promise<KubeConfig | undefined>;
  /** How often the cluster's version is read again. Default 10 minutes, as GitLab's agentk. */
  versionIntervalMs?: number;
}

/** A report that gets no answer by then is given up (the next tunnel reports again). */
const REPORT_DEADLINE_MS = 30_000;
const VERSION_INTERVAL_MS = 10 * 60_000;

export function agentTrackerAgentModule(config: AgentTrackerAgentConfig): AgentkModuleFactory {
  return {
    name: "agent_tracker",
    phase: Phase.capability,
    create({ kas, kasRpc, log }) {
      // The address and credentials are ignored: calls go over `kasRpc`, inside the tunnel.
      const client = new AgentTrackerServiceClient("kas", grpc.credentials.createInsecure(), {
        channelOverride: kasRpc,
      });
      const agentMeta: AgentMeta = {
        version: VERSION,
        commitId: commitId(),
        podNamespace: config.pod.namespace ?? "",
        podName: config.pod.name ?? "",
        kubernetesVersion: undefined,
      };
      const report = (session: TunnelSession) =>
        client.reportAgent(
          { agentMeta },
          // Queued until the channel's stream is up rather than failing at once.
          new grpc.Metadata({ waitForReady: true }),
          { deadline: Date.now() + REPORT_DEADLINE_MS },
          (err) => {
            if (err && !session.closed)
              log.warn({ err: err.message }, "cannot report agent version and pod to kas");
          },
        );
      /** Reads the cluster's version; a new one is reported over the current tunnel (the next ones report it anyway). */
      let reading = false;
      const refreshVersion = async (kc: KubeConfig) => {
        // One read at a time: an API server that does not answer is not asked again and again.
        if (reading) return;
        reading = true;
        try {
          const version = await readKubernetesVersion(kc);
          if (sameVersion(version, agentMeta.kubernetesVersion)) return;
          agentMeta.kubernetesVersion = version;
          const session = kas.active;
          if (session) report(session);
        } catch (err) {
          log.warn({ err: (err as Error).message }, "cannot read the cluster's Kubernetes version");
        } finally {
          reading = false;
        }
      };
      return {
        name: "agent_tracker",
        start(signal) {
          kas.on("connected", report);
          signal.addEventListener("abort", () => kas.off("connected", report));
          void config.kubeConfig?.().then(
            (kc) => {
              if (!kc || signal.aborted) return;
              void refreshVersion(kc);
              const timer = setInterval(
                () => void refreshVersion(kc),
                config.versionIntervalMs ?? VERSION_INTERVAL_MS,
              );
              // Not what keeps the process alive; stopped with the module.
              timer.unref();
              signal.addEventListener("abort", () => clearInterval(timer));
            },
            (err: Error) =>
              log.warn(
                { err: err.message },
                "no Kubernetes configuration: the cluster's version is not reported",
              ),
          );
        },
        // No client.close(): it would close the channel, which is agentk's and shared by every module.
      };
    },
  };
}
