// bench:gitops driver: git push -> every object applied, through in-process kas + agentk + the
// Kubernetes test server, against a baseline of the same objects applied directly with server-side
// apply through @kubernetes/client-node (no kas, no tunnel, no git).
//
// Setup: one kas (no Redis; the agent's configuration and manifest projects are local git
// repositories listed in its static tokens file), one agentk in this process connected to it, whose
// configuration lists one manifest project; the Kubernetes test server in this process too, with a
// stand-in Deployment controller (a Deployment whose generation moved is marked ready on the next
// tick, as a real controller would after its rollout) so that agentk's readiness wait ends.
// A run: a commit that changes every object (a ConfigMap's data, a Deployment's pod template
// annotation), then `POST /api/v1/notifications/git_push`; the time runs from the POST until kas
// has recorded the sync's ReportSync for that commit with every object `applied`. Completion is
// detected by polling kas's metrics (`kas_gitops_syncs_total` moved), then confirmed on kas's API
// (`GET /api/v1/agents/42/gitops`: last_sync.commitId and counts.applied).
import { mkdtemp, rm } from "node:fs/promises";
import type { Agent } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { KubeConfig, KubernetesObjectApi, PatchStrategy } from "@kubernetes/client-node";
import { stringify } from "yaml";
import { gitlabJwt, TOKEN } from "../../test/kas/support/fixtures.ts";
import type { InProcessKas } from "../../test/kas/support/in-process.ts";
import { kubeConfigFor } from "../../test/modules/gitops/agentk/helpers.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../test/support/agentk-in-process.ts";
import { GitRepo } from "../../test/support/git-repo.ts";
import { type KubeApiServer, startKubeApiServer } from "../../test/support/kube-apiserver.ts";
import { createLogger } from "../../tool/observability/index.ts";
import { notifyGitPush } from "../lib/git-push.ts";
import { startKasWithAgents } from "../lib/kas.ts";

export interface GitopsBenchOptions {
  sizes: number[];
  /** Measured runs per size (after one warm-up run that creates the new objects). */
  runs: number;
  namespaces: number;
  /** One file per object instead of one file per namespace and kind. */
  filePerObject: boolean;
  /**
   * An experiment, not agentk as built: make @kubernetes/client-node (in this whole process, so
   * agentk and the baseline alike) reuse one keep-alive https.Agent per cluster and TLS options
   * instead of a new Agent, so a new TLS connection, per request.
   */
  reuseConnections: boolean;
  /** Poll interval of kas's metrics while waiting for the report. */
  pollMs: number;
  log: (line: string) => void;
}

export interface RunSample {
  /** POST -> ReportSync recorded by kas with every object applied. */
  totalMs: number;
  /** POST -> kas had read and sent the commit (last_sent.at; wall clock, ms resolution). */
  kasSentMs: number;
  /** agentk's own sync duration (the report's durationMs: parse, plan, apply, inventory, readiness). */
  agentSyncMs: number;
}

export interface SizeResult {
  objects: number;
  files: number;
  bytes: number;
  gitops: RunSample[];
  /** Direct server-side apply of the same objects, sequential (ms per run). */
  baselineMs: number[];
  /** Kubernetes API requests the test server received per GitOps run (last run). */
  kubeRequestsPerRun: number;
}

const AGENT_ID = 42;
const PROJECT = "bench/manifests";
const AGENT_NAME = "bench";

/** The objects of one run, by file. Half ConfigMaps, half Deployments, round-robin over namespaces. */
export function manifests(
  n: number,
  round: string,
  o: { namespaces: number; nsPrefix: string; filePerObject: boolean },
): Map<string, object[]> {
  const files = new Map<string, object[]>();
  const add = (file: string, obj: object) => {
    const list = files.get(file);
    if (list) list.push(obj);
    else files.set(file, [obj]);
  };
  for (let i = 0; i < n; i++) {
    const ns = `${o.nsPrefix}${i % o.namespaces}`;
    const app = `app-${String(Math.floor(i / 2)).padStart(4, "0")}`;
    if (i % 2 === 0) {
      const obj = {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: `${app}-config`, namespace: ns, labels: { app } },
        data: { round, "settings.properties": `log.level=info\nworkers=4\nround=${round}\n` },
      };
      add(o.filePerObject ? `${ns}/${app}-config.yaml` : `${ns}/configmaps.yaml`, obj);
    } else {
      const obj = {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: app, namespace: ns, labels: { app } },
        spec: {
          replicas: 2,
          selector: { matchLabels: { app } },
          template: {
            metadata: { labels: { app }, annotations: { "bench/round": round } },
            spec: {
              containers: [
                {
                  name: "app",
                  image: "registry.example/app:1.0",
                  ports: [{ containerPort: 8080 }],
                  env: [{ name: "ROUND", value: round }],
                },
              ],
            },
          },
        },
      };
      add(o.filePerObject ? `${ns}/${app}.yaml` : `${ns}/deployments.yaml`, obj);
    }
  }
  return files;
}

const toYaml = (docs: object[]) => docs.map((d) => stringify(d)).join("---\n");

/** See `reuseConnections`: patches KubeConfig's (private) createAgent to cache its agents. */
export function reuseKubeConnections(): void {
  type CreateAgent = (cluster: { server?: string; proxyUrl?: string } | null, options: object) => Agent;
  const proto = KubeConfig.prototype as unknown as { createAgent: CreateAgent };
  const original = proto.createAgent;
  const agents = new Map<string, Agent>();
  proto.createAgent = function (this: KubeConfig, cluster, options) {
    const key = JSON.stringify([cluster?.server, cluster?.proxyUrl, options]);
    let agent = agents.get(key);
    if (!agent) {
      agent = original.call(this, cluster, { ...options, keepAlive: true });
      agents.set(key, agent);
    }
    return agent;
  };
}

export async function measureGitops(o: GitopsBenchOptions): Promise<SizeResult[]> {
  if (o.reuseConnections) reuseKubeConnections();
  const dir = await mkdtemp(join(tmpdir(), "bench-gitops-"));
  let api: KubeApiServer | undefined;
  let kas: InProcessKas | undefined;
  let agent: InProcessAgentk | undefined;
  const repos: GitRepo[] = [];
  const results: SizeResult[] = [];
  try {
    api = await startKubeApiServer();
    const kube = api;
    for (let k = 0; k < o.namespaces; k++) {
      for (const prefix of ["bench-", "base-"]) {
        kube.store.create("namespaces", undefined, { metadata: { name: `${prefix}${k}` } });
      }
    }
    // The stand-in Deployment controller: a Deployment whose generation moved becomes ready.
    const due = new Map<string, [string, string]>();
    let scheduled = false;
    kube.store.on("change", (ev) => {
      if (ev.resource !== "deployments.apps" || ev.type === "DELETED") return;
      const m = ev.object.metadata;
      const seen = (ev.object.status as { observedGeneration?: number } | undefined)?.observedGeneration;
      if (seen !== undefined && seen >= (m.generation ?? 1)) return;
      due.set(`${m.namespace}/${m.name}`, [m.namespace!, m.name!]);
      if (!scheduled) {
        scheduled = true;
        setImmediate(() => {
          scheduled = false;
          const batch = [...due.values()];
          due.clear();
          for (const [ns, name] of batch) {
            try {
              kube.setDeploymentReady(ns, name, true);
            } catch {}
          }
        });
      }
    });

    const configRepo = await GitRepo.init();
    repos.push(configRepo);
    const manifestRepo = await GitRepo.init();
    repos.push(manifestRepo);
    await configRepo.commit({
      [`.gitlab/agents/${AGENT_NAME}/config.yaml`]: stringify({
        gitops: {
          manifest_projects: [
            {
              id: PROJECT,
              default_namespace: "bench-0",
              paths: [{ glob: "**/*.yaml" }],
              reconcile_timeout: "60s",
            },
          ],
        },
      }),
    });
    await manifestRepo.commit({ "README.md": "bench\n" });
    const projects = { [PROJECT]: manifestRepo.path };
    const bench = { agentId: AGENT_ID, projectId: 7, agentName: AGENT_NAME, repository: configRepo.path };
    // kas's defaults (Gitaly rate limits included) but the poll periods: an hour, so that only
    // the push notification brings a change.
    kas = await startKasWithAgents(dir, { [TOKEN]: { ...bench, manifest_projects: projects } }, (c) => {
      c.agent.configuration.pollPeriodMs = 3_600_000;
      c.agent.gitops.pollPeriodMs = 3_600_000;
    });
    const k = kas;
    const kubeconfig = await kube.writeKubeconfig(join(dir, "kubeconfig"));
    agent = await startInProcessAgentk({
      kasUrl: k.addresses.agent,
      token: TOKEN,
      kubernetes: kubeconfig,
      log: createLogger({ level: "info", destination: { write: () => true } }),
    });

    let jwt = await gitlabJwt(k.apiSecret);
    let jwtAt = Date.now();
    const apiGet = async (path: string) => {
      if (Date.now() - jwtAt > 30_000) {
        jwt = await gitlabJwt(k.apiSecret);
        jwtAt = Date.now();
      }
      return fetch(`${k.addresses.api}${path}`, { headers: { "gitlab-kas-api-request": jwt } });
    };
    const push = async () => {
      if (Date.now() - jwtAt > 30_000) {
        jwt = await gitlabJwt(k.apiSecret);
        jwtAt = Date.now();
      }
      await notifyGitPush(k.addresses.api, jwt, { full_path: PROJECT });
    };
    const syncsTotal = async () => {
      const text = await (await fetch(`${k.addresses.observability}/metrics`)).text();
      let n = 0;
      for (const m of text.matchAll(/^kas_gitops_syncs_total\{[^}]*\} (\S+)$/gm)) n += Number(m[1]);
      return n;
    };
    interface Shown {
      manifest_projects: Array<{
        project: string;
        last_sent: { commitId: string; at: string } | null;
        last_sync: {
          commitId: string;
          durationMs: number;
          error?: string;
          counts: Record<string, number>;
        } | null;
      }>;
    }
    const shown = async () => {
      const body = (await (await apiGet(`/api/v1/agents/${AGENT_ID}/gitops`)).json()) as Shown;
      return body.manifest_projects.find((p) => p.project === PROJECT);
    };

    // agentk opened its stream and applied the first commit (no objects yet).
    const until = Date.now() + 30_000;
    while ((await shown())?.last_sync == null) {
      if (Date.now() > until) throw new Error("agentk did not report its first sync");
      await sleep(50);
    }
    o.log("  kas, agentk and the Kubernetes test server are up; the first (empty) sync was reported");

    const baselineApi = kubeConfigFor(kube).makeApiClient(KubernetesObjectApi);
    let roundNo = 0;
    for (const n of o.sizes) {
      const result: SizeResult = {
        objects: n,
        files: 0,
        bytes: 0,
        gitops: [],
        baselineMs: [],
        kubeRequestsPerRun: 0,
      };
      for (let run = 0; run <= o.runs; run++) {
        const round = `r${++roundNo}`;
        const byFile = manifests(n, round, { ...o, nsPrefix: "bench-" });
        const files = Object.fromEntries([...byFile].map(([f, docs]) => [f, toYaml(docs)]));
        result.files = byFile.size;
        result.bytes = Object.values(files).reduce((s, t) => s + Buffer.byteLength(t), 0);
        const commit = await manifestRepo.commit(files, { message: round });
        const before = await syncsTotal();
        const requestsBefore = kube.requests.length;
        await sleep(100); // let the process settle after git and the metrics read
        const t0 = performance.now();
        const wall0 = Date.now();
        await push();
        const deadline = t0 + 120_000;
        let sample: RunSample | undefined;
        for (;;) {
          if ((await syncsTotal()) > before) {
            const t = performance.now();
            const p = await shown();
            const sync = p?.last_sync;
            if (sync?.commitId === commit) {
              if ((sync.counts.applied ?? 0) !== n || sync.error) {
                throw new Error(
                  `${n} objects: the sync of ${round} reported ${JSON.stringify(sync.counts)}${sync.error ? `, error ${sync.error}` : ""}`,
                );
              }
              sample = {
                totalMs: t - t0,
                kasSentMs:
                  p?.last_sent?.commitId === commit ? Date.parse(p.last_sent.at) - wall0 : Number.NaN,
                agentSyncMs: sync.durationMs,
              };
              break;
            }
          }
          if (performance.now() > deadline) throw new Error(`${n} objects: no report of ${round} in 120 s`);
          await sleep(o.pollMs);
        }
        result.kubeRequestsPerRun = kube.requests.length - requestsBefore;
        const label = run === 0 ? "warm-up" : `run ${run}`;
        o.log(
          `  ${n} objects, ${label}: ${Math.round(sample.totalMs)} ms (kas sent at ${sample.kasSentMs} ms, agentk sync ${sample.agentSyncMs} ms, ${result.kubeRequestsPerRun} Kubernetes requests)`,
        );
        if (run > 0) result.gitops.push(sample);
      }

      // Baseline: the same objects (other namespaces), server-side apply one after the other.
      for (let run = 0; run <= o.runs; run++) {
        const round = `b${++roundNo}`;
        const objects = [...manifests(n, round, { ...o, nsPrefix: "base-" }).values()].flat();
        await sleep(100);
        const t0 = performance.now();
        for (const obj of objects) {
          await baselineApi.patch(
            obj as never,
            undefined,
            undefined,
            "bench-baseline",
            true,
            PatchStrategy.ServerSideApply,
          );
        }
        const ms = performance.now() - t0;
        o.log(`  ${n} objects, baseline ${run === 0 ? "warm-up" : `run ${run}`}: ${Math.round(ms)} ms`);
        if (run > 0) result.baselineMs.push(ms);
      }
      results.push(result);
    }
    return results;
  } finally {
    await agent?.stop();
    await kas?.close();
    await api?.close();
    await Promise.all(repos.map((r) => r.remove()));
    await rm(dir, { recursive: true, force: true });
  }
}
