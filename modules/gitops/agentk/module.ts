// GitOps's agentk half: for each manifest project of the agent configuration, keeps a
// GetObjectsToSynchronize stream open to kas (over the tunnel's gRPC channel), applies each commit
// it brings with the applier, re-applies the last one periodically to undo drift, and reports
// every sync (ReportSync). Runs once per agent (leaderOnly), not once per agentk replica.
import { setTimeout as sleep } from "node:timers/promises";
import * as grpc from "@grpc/grpc-js";
import type { KubeConfig } from "@kubernetes/client-node";
import { Counter, type Registry } from "prom-client";
import {
  type GetObjectsToSynchronizeResponse,
  GitopsServiceClient,
  type ReportSyncRequest,
} from "../../../proto/gen/gitops/v1/gitops.ts";
import type { Logger } from "../../../tool/observability/index.ts";
import {
  type AgentkModuleDeps,
  type AgentkModuleFactory,
  clusterModule,
  DEFAULT_STREAM_BACKOFF,
  followStreams,
  type Module,
  type StreamBackoff,
  streamEnd,
  waitForReady,
} from "../../runtime/index.ts";
import type { Applier, ManifestProject, SyncOutcome } from "./applier/index.ts";

/** A commit's files may total this much; a bigger commit is refused (reported, not applied). */
export const MAX_COMMIT_BYTES = 20 * 1024 * 1024;
/** The last commit is applied again this often, undoing drift (changes made in the cluster by hand). */
export const DEFAULT_DRIFT_INTERVAL_MS = 5 * 60_000;
const REPORT_DEADLINE_MS = 30_000;

export interface GitopsAgentOptions {
  /** agentk's Kubernetes client configuration; undefined: no cluster, so GitOps stays idle. */
  kubeConfig: () => Promise<KubeConfig | undefined>;
  /** Server-side apply's field manager. Default `agentk`. */
  fieldManager?: string;
  /** Part of every inventory id (two agents applying one project to one cluster keep apart). Default `agentk`. */
  owner?: string;
  /** Reconnect delays after a stream ends (the channel itself waits for a tunnel). */
  backoff?: StreamBackoff;
  /** How often the last commit is applied again. Default 5 minutes. */
  driftIntervalMs?: number;
  maxCommitBytes?: number;
  /** The applier's polling of readiness and deletions. Default 1 s. */
  pollIntervalMs?: number;
}

/** The module, as agentk lists it: once per agent and only with a cluster (see `clusterModule`), a fresh one each term of this replica's. */
export function gitopsAgentModule(options: GitopsAgentOptions): AgentkModuleFactory {
  return clusterModule({
    name: "gitops",
    kubeConfig: options.kubeConfig,
    withoutCluster: "no Kubernetes configuration: GitOps manifest projects are not applied",
    create: (kc, deps) => createGitopsModule(kc, options, deps),
  });
}

async function createGitopsModule(
  kc: KubeConfig,
  options: GitopsAgentOptions,
  { kasRpc, log, registry, configuration }: AgentkModuleDeps,
): Promise<Module> {
  const syncs = syncsCounter(registry);
  const { Applier } = await import("./applier/index.ts");
  const applier = new Applier({
    kc,
    ...(options.fieldManager !== undefined && { fieldManager: options.fieldManager }),
    ...(options.owner !== undefined && { owner: options.owner }),
    ...(options.pollIntervalMs !== undefined && { pollIntervalMs: options.pollIntervalMs }),
  });
  // The address and credentials are ignored: calls go over `kasRpc`, inside the tunnel.
  const client = new GitopsServiceClient("kas", grpc.credentials.createInsecure(), {
    channelOverride: kasRpc,
  });
  const workers = new Map<string, ProjectWorker>();
  const context: WorkerContext = {
    client,
    applier,
    log,
    syncs,
    backoff: options.backoff ?? DEFAULT_STREAM_BACKOFF,
    driftIntervalMs: options.driftIntervalMs ?? DEFAULT_DRIFT_INTERVAL_MS,
    maxCommitBytes: options.maxCommitBytes ?? MAX_COMMIT_BYTES,
  };
  let following: Promise<void> = Promise.resolve();

  const reconcile = (projects: ManifestProject[]) => {
    const wanted = new Map<string, ManifestProject>();
    for (const p of projects) {
      if (wanted.has(p.id)) {
        log.warn({ project: p.id }, "manifest project listed twice; the first entry is used");
        continue;
      }
      wanted.set(p.id, p);
    }
    for (const [id, worker] of workers) {
      const next = wanted.get(id);
      if (next && sameStream(worker.project, next)) continue;
      // Gone, or its stream changes (ref, paths): this worker ends; a new one starts below.
      worker.stop();
      workers.delete(id);
      if (!next) log.info({ project: id }, "manifest project removed from the configuration");
    }
    for (const [id, project] of wanted) {
      const worker = workers.get(id);
      if (worker) worker.update(project);
      else {
        const w = new ProjectWorker(project, context);
        workers.set(id, w);
        w.start();
      }
    }
  };

  return {
    name: "gitops",
    start(signal) {
      following = (async () => {
        for await (const config of configuration.watch(signal)) {
          reconcile(config.gitops?.manifest_projects ?? []);
        }
      })().catch((err: unknown) => log.error({ err }, "following the configuration failed"));
      signal.addEventListener("abort", () => {
        for (const w of workers.values()) w.stop();
      });
    },
    async close(graceMs) {
      for (const w of workers.values()) w.stop();
      const all = Promise.all([following, ...[...workers.values()].map((w) => w.done)]);
      const grace = new AbortController();
      await Promise.race([all, sleep(graceMs, undefined, { signal: grace.signal }).catch(() => {})]);
      grace.abort();
      workers.clear();
    },
    // No client.close(): it would close the channel, which is agentk's and shared by every module.
  };
}

function syncsCounter(registry: Registry): Counter<"result"> {
  // A fresh module instance per leader term: the counter is registered once.
  const existing = registry.getSingleMetric("agentk_gitops_syncs_total");
  if (existing) return existing as Counter<"result">;
  return new Counter({
    name: "agentk_gitops_syncs_total",
    help: "GitOps syncs of manifest projects, by result (success; failure: an object failed or the sync did not complete; too_large: the commit was refused).",
    labelNames: ["result"],
    registers: [registry],
  });
}

/** Whether two entries of a project read the same files (the stream stays; other options apply at the next sync). */
function sameStream(a: ManifestProject, b: ManifestProject): boolean {
  return JSON.stringify([a.ref ?? null, a.paths]) === JSON.stringify([b.ref ?? null, b.paths]);
}

interface WorkerContext {
  client: GitopsServiceClient;
  applier: Applier;
  log: Logger;
  syncs: Counter<"result">;
  backoff: StreamBackoff;
  driftIntervalMs: number;
  maxCommitBytes: number;
}

interface Commit {
  commitId: string;
  /** The agent's id, as kas knows it ("0": an older kas that does not say). */
  agentId: string;
  files: Map<string, Buffer>;
  /** Set when the commit was refused (too large): reported, not applied. */
  refused?: string;
}

/** One manifest project: its stream from kas, and its syncs, one at a time. */
class ProjectWorker {
  project: ManifestProject;
  readonly #ctx: WorkerContext;
  readonly #log: Logger;
  readonly #stop = new AbortController();
  /** The commit last applied: sent as commit_id, re-applied against drift. */
  #applied: Commit | undefined;
  /** A commit received and not yet applied (only the newest is kept). */
  #pending: Commit | undefined;
  /** Ends the current sync's readiness wait when a newer commit arrives. */
  #syncWait: AbortController | undefined;
  #wake: (() => void) | undefined;
  #woken = false;
  done: Promise<void> = Promise.resolve();

  constructor(project: ManifestProject, ctx: WorkerContext) {
    this.project = project;
    this.#ctx = ctx;
    this.#log = ctx.log.child({ project: project.id });
  }

  start(): void {
    const signal = this.#stop.signal;
    this.done = Promise.all([
      this.#followLoop(signal).catch((err: unknown) =>
        this.#log.error({ err }, "manifest stream loop failed"),
      ),
      this.#syncLoop(signal).catch((err: unknown) => this.#log.error({ err }, "sync loop failed")),
    ]).then(() => {});
  }

  stop(): void {
    this.#stop.abort(new Error("manifest project stopped"));
    this.#kick();
  }

  /** New options for the same stream: applied to the last commit at once. */
  update(project: ManifestProject): void {
    if (JSON.stringify(project) === JSON.stringify(this.project)) return;
    this.project = project;
    if (this.#applied && !this.#pending) this.#pending = this.#applied;
    this.#kick();
  }

  #kick(): void {
    this.#woken = true;
    this.#wake?.();
  }

  /** Until kicked (a commit, new options, stop) or `ms` passed. */
  async #sleepUntilKicked(ms: number | undefined): Promise<void> {
    if (!this.#woken) {
      await new Promise<void>((resolve) => {
        const timer = ms === undefined ? undefined : setTimeout(() => this.#wake?.(), Math.max(0, ms));
        this.#wake = () => {
          clearTimeout(timer);
          this.#wake = undefined;
          resolve();
        };
      });
    }
    this.#woken = false;
  }

  #followLoop(signal: AbortSignal): Promise<void> {
    return followStreams(signal, this.#ctx.backoff, (s) => this.#follow(s));
  }

  /** One stream until it ends; resolves with whether it went well (brought a commit, lasted, or ended OK). */
  #follow(signal: AbortSignal): Promise<boolean> {
    const { client, maxCommitBytes } = this.#ctx;
    const project = this.project;
    let received = false;
    const call = client.getObjectsToSynchronize(
      {
        projectId: project.id,
        commitId: this.#pending?.commitId ?? this.#applied?.commitId ?? "",
        paths: project.paths.map((p) => ({ glob: p.glob })),
        ref: project.ref ? { ...project.ref } : undefined,
      },
      waitForReady(),
    );
    let commit:
      | {
          commitId: string;
          agentId: string;
          chunks: Map<string, Buffer[]>;
          last: string;
          bytes: number;
          refused?: string;
        }
      | undefined;
    const protocolError = (message: string) => {
      this.#log.warn({ err: message }, "unexpected message on the manifest stream; reconnecting");
      commit = undefined;
      call.cancel();
    };
    call.on("data", (message: GetObjectsToSynchronizeResponse) => {
      if (message.header) {
        commit = {
          commitId: message.header.commitId,
          agentId: message.header.agentId,
          chunks: new Map(),
          last: "",
          bytes: 0,
        };
      } else if (message.object) {
        if (!commit) return protocolError("an object before any header");
        const { source, data } = message.object;
        if (commit.refused) return;
        commit.bytes += data.length;
        if (commit.bytes > maxCommitBytes) {
          commit.refused = `the commit's files exceed ${maxCommitBytes} bytes; it is not applied`;
          commit.chunks.clear(); // the rest is dropped until the trailer
          return;
        }
        const chunks = commit.chunks.get(source);
        if (chunks && source !== commit.last) return protocolError(`file ${source} sent in two parts apart`);
        if (chunks) chunks.push(data);
        else commit.chunks.set(source, [data]);
        commit.last = source;
      } else if (message.trailer) {
        if (!commit) return protocolError("a trailer before any header");
        received = true;
        const files = new Map([...commit.chunks].map(([s, parts]) => [s, Buffer.concat(parts)] as const));
        this.#receive({
          commitId: commit.commitId,
          agentId: commit.agentId,
          files,
          ...(commit.refused && { refused: commit.refused }),
        });
        commit = undefined;
      }
    });
    return streamEnd(call, signal, {
      received: () => received,
      quiet: [grpc.status.UNAVAILABLE, grpc.status.CANCELLED],
      log: this.#log,
      message: "manifest stream failed",
    });
  }

  #receive(commit: Commit): void {
    this.#log.info({ commitId: commit.commitId, files: commit.files.size }, "commit received");
    this.#pending = commit;
    this.#syncWait?.abort(new Error(`commit ${commit.commitId} arrived`));
    this.#kick();
  }

  async #syncLoop(signal: AbortSignal): Promise<void> {
    let lastSync = 0;
    while (!signal.aborted) {
      const drift =
        this.#applied && !this.#applied.refused
          ? lastSync + this.#ctx.driftIntervalMs - Date.now()
          : undefined;
      await this.#sleepUntilKicked(drift);
      if (signal.aborted) break;
      const commit = this.#pending ?? this.#applied;
      this.#pending = undefined;
      if (!commit) continue;
      await this.#sync(commit, signal);
      lastSync = Date.now();
    }
  }

  async #sync(commit: Commit, signal: AbortSignal): Promise<void> {
    const { applier, syncs, client } = this.#ctx;
    const project = this.project;
    const started = Date.now();
    let outcome: SyncOutcome;
    if (commit.refused) {
      outcome = { objects: [], error: commit.refused, dryRun: project.dry_run_strategy !== "none" };
    } else {
      this.#syncWait = new AbortController();
      try {
        outcome = await applier.apply({
          project,
          // Inventories are named after the agent (kas says who it is), else the applier's owner.
          ...(commit.agentId !== "0" && commit.agentId !== "" && { owner: `agent-${commit.agentId}` }),
          files: commit.files,
          signal,
          waitSignal: this.#syncWait.signal,
        });
      } catch (err) {
        if (signal.aborted) return;
        outcome = {
          objects: [],
          error: `the sync failed: ${(err as Error).message}`,
          dryRun: project.dry_run_strategy !== "none",
        };
      } finally {
        this.#syncWait = undefined;
      }
    }
    // Applied (even partly): not asked for again; a refused commit neither (until the ref moves).
    this.#applied = commit;
    const failed = outcome.objects.filter((o) => o.status === "failed").length;
    const result = commit.refused ? "too_large" : outcome.error || failed > 0 ? "failure" : "success";
    syncs.inc({ result });
    const counts: Record<string, number> = {};
    for (const o of outcome.objects) counts[o.status] = (counts[o.status] ?? 0) + 1;
    (result === "success" ? this.#log.info : this.#log.warn).call(
      this.#log,
      {
        commitId: commit.commitId,
        ...counts,
        ...(outcome.error && { err: outcome.error }),
        dryRun: outcome.dryRun,
      },
      "manifest project synced",
    );
    const report: ReportSyncRequest = {
      projectId: project.id,
      commitId: commit.commitId,
      durationMs: String(Date.now() - started),
      objects: outcome.objects,
      error: outcome.error,
      mode: outcome.dryRun ? "dry_run" : "",
    };
    await new Promise<void>((resolve) => {
      client.reportSync(
        report,
        new grpc.Metadata({ waitForReady: true }),
        { deadline: Date.now() + REPORT_DEADLINE_MS },
        (err) => {
          if (err && !signal.aborted)
            this.#log.warn({ code: err.code, err: err.details }, "ReportSync failed");
          resolve();
        },
      );
    });
  }
}
