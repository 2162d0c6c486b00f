// Flux's agentk half, once per agent (leaderOnly), as GitLab's agent: where Flux's CRDs are
// installed, each GitRepository on GitLab gets a webhook Receiver of agentk's (controller.ts);
// agentk follows kas's stream of pushes to those Receivers' projects (project-stream.ts) and, for
// each push, calls the project's Receivers under `flux.webhook_receiver_url` (trigger.ts), which
// makes Flux reconcile the GitRepository at once instead of at its next poll.
import { setTimeout as sleep } from "node:timers/promises";
import * as grpc from "@grpc/grpc-js";
import { ApiException, type KubeConfig } from "@kubernetes/client-node";
import { FluxServiceClient, type GetGitLabResponse } from "../../../proto/gen/flux/v1/flux.ts";
import { GitLabFluxClient } from "../../../proto/gen/flux/v1/gitlab_flux_rpc.ts";
import type { Logger } from "../../../tool/observability/index.ts";
import {
  type AgentkModuleDeps,
  type AgentkModuleFactory,
  clusterModule,
  DEFAULT_STREAM_BACKOFF,
  type Module,
  type StreamBackoff,
  waitForReady,
} from "../../runtime/index.ts";
import { FluxController } from "./controller.ts";
import { missingFluxCrd } from "./crds.ts";
import { createFluxAgentMetrics, type FluxAgentMetrics } from "./metrics.ts";
import { gitlabHost } from "./project-path.ts";
import { DEFAULT_DEBOUNCE_MS, ProjectStream } from "./project-stream.ts";
import { DEFAULT_WEBHOOK_RECEIVER_URL, ReceiverTrigger } from "./trigger.ts";

export interface FluxAgentOptions {
  /** agentk's Kubernetes configuration; without one the module stays idle. */
  kubeConfig: () => Promise<KubeConfig | undefined>;
  /** How long the Receivers' projects must hold still before a new stream asks for them. Default 10 s (GitLab's). */
  debounceMs?: number;
  /** Delays before a new stream to kas after one ended. Default 250 ms doubling to 30 s. */
  backoff?: StreamBackoff;
  /** Delays before a failed apply, list or watch is tried again. Default 1 s doubling to 30 s. */
  kubeBackoff?: { initialMs: number; maxMs: number };
}

/** Pushes waiting for their Receivers to be called; more are dropped (kas sends at most a few at a time). */
const MAX_PENDING_TRIGGERS = 100;

export function fluxAgentModule(options: FluxAgentOptions): AgentkModuleFactory {
  return clusterModule({
    name: "flux",
    kubeConfig: options.kubeConfig,
    withoutCluster: "no Kubernetes configuration: no Flux notifications",
    create: (kc, deps) => createFluxModule(kc, options, deps),
  });
}

async function createFluxModule(
  kc: KubeConfig,
  options: FluxAgentOptions,
  { kasRpc, log, registry, configuration }: AgentkModuleDeps,
): Promise<Module> {
  const metrics = createFluxAgentMetrics(registry);
  // The address and credentials are ignored: calls go over `kasRpc`, inside the tunnel.
  const insecure = grpc.credentials.createInsecure();
  const flux = new FluxServiceClient("kas", insecure, { channelOverride: kasRpc });
  const gitlabFlux = new GitLabFluxClient("kas", insecure, { channelOverride: kasRpc });
  const stop = new AbortController();
  let running: Promise<void> = Promise.resolve();
  return {
    name: "flux",
    start(signal) {
      signal.addEventListener("abort", () => stop.abort(), { once: true });
      running = run().catch((err: unknown) => {
        if (!stop.signal.aborted) log.error({ err }, "flux: the module failed");
      });
    },
    drain() {
      stop.abort();
    },
    async close() {
      stop.abort();
      await running;
    },
    // No client.close(): it would close the channel, which is agentk's and shared by every module.
  };

  async function run(): Promise<void> {
    const signal = stop.signal;
    let missing: string | undefined;
    try {
      missing = await missingFluxCrd(kc!);
    } catch (err) {
      // GitLab's agent idles too: it cannot tell whether Flux is there (no RBAC for CRDs, say).
      log.warn({ err: errorText(err) }, "flux: cannot tell whether Flux is installed; the module idles");
      return;
    }
    if (missing !== undefined) {
      log.info(
        { crd: missing },
        "flux: Flux is not installed; the module idles until agentk's next leader term",
      );
      return;
    }
    const gitlab = await getGitLab(flux, signal, options.backoff ?? DEFAULT_STREAM_BACKOFF, log);
    if (!gitlab) return;
    const host = gitlabHost(gitlab.externalUrl);
    if (host === undefined) {
      log.warn("flux: kas has no gitlab.external_url; no GitRepository can be told to be GitLab's");
      return;
    }
    const triggers = new Triggers(kc!, metrics, log);
    const stream = new ProjectStream({
      client: gitlabFlux,
      backoff: options.backoff ?? DEFAULT_STREAM_BACKOFF,
      debounceMs: options.debounceMs ?? DEFAULT_DEBOUNCE_MS,
      log,
      following: (n) => metrics.followed.set(n),
      onPushed: (project) => triggers.pushed(project, controller.receiversOf(project), signal),
    });
    const controller = new FluxController(kc!, {
      host,
      agentId: gitlab.agentId,
      log,
      backoff: options.kubeBackoff ?? { initialMs: 1000, maxMs: 30_000 },
      onProjects: (projects) => stream.setProjects(projects),
    });
    // As GitLab's: nothing runs before the agent configuration says where the Receivers are.
    const configs = configuration.watch(signal);
    const first = await configs.next();
    if (first.done) return;
    triggers.configure(first.value.flux?.webhook_receiver_url);
    const following = (async () => {
      for await (const config of configs) triggers.configure(config.flux?.webhook_receiver_url);
    })();
    controller.start();
    log.info({ gitlabHost: host }, "flux: watching GitRepositories");
    try {
      await Promise.all([stream.run(signal), following]);
    } finally {
      controller.stop();
    }
  }
}

function errorText(err: unknown): string {
  if (err instanceof ApiException) return `HTTP ${err.code}`;
  return err instanceof Error ? err.message : String(err);
}

/** The agent's id and GitLab's external URL from kas, asked again after failures; undefined once stopped. */
async function getGitLab(
  client: FluxServiceClient,
  signal: AbortSignal,
  backoff: StreamBackoff,
  log: Logger,
): Promise<GetGitLabResponse | undefined> {
  let delay = backoff.initialMs;
  while (!signal.aborted) {
    try {
      return await new Promise<GetGitLabResponse>((resolve, reject) => {
        const call = client.getGitLab({}, waitForReady(), (err, response) =>
          err ? reject(err) : resolve(response),
        );
        signal.addEventListener("abort", () => call.cancel(), { once: true });
      });
    } catch (err) {
      if (signal.aborted) break;
      log.warn(
        { err: (err as grpc.ServiceError).details ?? String(err), retryInMs: delay },
        "flux: cannot ask kas",
      );
      await sleep(delay, undefined, { signal }).catch(() => {});
      delay = Math.min(delay * 2, backoff.maxMs);
    }
  }
  return undefined;
}

type Targets = ReturnType<FluxController["receiversOf"]>;

/** Calls Receivers one push at a time, each call with its deadline; a metric and a log line per call. */
class Triggers {
  #trigger: ReceiverTrigger | undefined;
  #chain: Promise<void> = Promise.resolve();
  #pending = 0;

  constructor(
    readonly kc: KubeConfig,
    readonly metrics: FluxAgentMetrics,
    readonly log: Logger,
  ) {}

  /** `flux.webhook_receiver_url` of the agent configuration (absent: GitLab's default). */
  configure(url: string | undefined): void {
    try {
      this.#trigger = new ReceiverTrigger(url ?? DEFAULT_WEBHOOK_RECEIVER_URL, this.kc);
    } catch (err) {
      this.#trigger = undefined;
      this.log.error({ err: (err as Error).message }, "flux: no Receiver can be called");
    }
  }

  pushed(project: string, targets: Targets, signal: AbortSignal): void {
    if (targets.length === 0) {
      this.log.debug({ project }, "flux: pushed project has no Receiver with a webhook path (yet)");
      return;
    }
    if (this.#pending >= MAX_PENDING_TRIGGERS) {
      this.log.warn({ project }, "flux: too many pushes waiting; dropping one");
      return;
    }
    this.#pending++;
    this.#chain = this.#chain.then(async () => {
      try {
        for (const t of targets) await this.#call(project, t, signal);
      } finally {
        this.#pending--;
      }
    });
  }

  async #call(
    project: string,
    { receiver, webhookPath }: Targets[number],
    signal: AbortSignal,
  ): Promise<void> {
    if (signal.aborted) return;
    const where = { project, namespace: receiver.metadata.namespace, receiver: receiver.metadata.name };
    const trigger = this.#trigger;
    if (!trigger) {
      this.metrics.triggers.inc({ result: "failed" });
      this.log.warn(where, "flux: cannot trigger a reconcile: flux.webhook_receiver_url is not usable");
      return;
    }
    try {
      await trigger.trigger(webhookPath, signal);
      this.metrics.triggers.inc({ result: "triggered" });
      this.log.info(where, "flux: reconcile triggered after a push");
    } catch (err) {
      if (signal.aborted) return;
      this.metrics.triggers.inc({ result: "failed" });
      this.log.warn({ ...where, err: (err as Error).message }, "flux: cannot trigger a reconcile");
    }
  }
}
