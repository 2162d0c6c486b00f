// npm run bench:agentk-resources [-- --json] [-- --seconds 20 --objects 100 --clients 8]
// What agentk costs in a pod: its resident memory and CPU, read from /proc, as the compiled daemon
// (node dist/cmd/agentk/main.js, as the image runs it) against in-process kas and the Kubernetes test
// server. Phases: connected and idle (the baseline, measured in the same run), then a light
// realistic load: `clients` concurrent requests through the tunnel (Kubernetes API reads through
// kas's proxy, an allow-listed service through kas's API) and a GitOps sync of `objects` objects
// every 5 s (commit, push notification, agentk applies). deploy/agentk/base/deployment.yaml's requests
// and limits come from this table.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { stringify } from "yaml";
import { gitlabJwt, TOKEN } from "../../test/kas/support/fixtures.ts";
import type { InProcessKas } from "../../test/kas/support/in-process.ts";
import { GitRepo } from "../../test/support/git-repo.ts";
import { type KubeApiServer, startKubeApiServer } from "../../test/support/kube-apiserver.ts";
import { manifests } from "../gitops/push.ts";
import { benchArgs } from "../lib/args.ts";
import { startKasWithAgents } from "../lib/kas.ts";
import { markdownTable, percentile, round } from "../lib/stats.ts";
import { cpuSeconds, rssKiB } from "../scale/proc.ts";

const { args, log } = benchArgs({
  seconds: "20",
  objects: "100",
  clients: "8",
});
const SECONDS = Number(args.seconds);
const OBJECTS = Number(args.objects);
const CLIENTS = Number(args.clients);
const PROJECT = "bench/manifests";
const root = new URL("../..", import.meta.url).pathname;

log("building dist/ (npm run build)");
execFileSync("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: root, stdio: "inherit" });

const dir = await mkdtemp(join(tmpdir(), "bench-agentk-"));
let kube: KubeApiServer | undefined;
let kas: InProcessKas | undefined;
let agentk: ChildProcess | undefined;
const service = createServer((_req, res) => {
  // A Prometheus-sized answer: ~20 KiB of metrics.
  res.setHeader("content-type", "text/plain; version=0.0.4");
  res.end("# TYPE bench_metric gauge\n".concat('bench_metric{pod="x"} 1\n'.repeat(800)));
});

interface Phase {
  name: string;
  requests: number;
  /** Requests answered with an error status (the first is logged). */
  errors: number;
  syncs: number;
  rssMiB: number[];
  /** CPU used per 1 s window, in millicores. */
  cpuMillicores: number[];
  cpuTotalS: number;
  seconds: number;
}

try {
  kube = await startKubeApiServer();
  const k8s = kube;
  k8s.store.create("namespaces", undefined, { metadata: { name: "gitlab-agent" } });
  for (let i = 0; i < 4; i++) k8s.store.create("namespaces", undefined, { metadata: { name: `bench-${i}` } });
  for (let i = 0; i < 30; i++) {
    k8s.store.create("pods", "default", {
      metadata: { name: `web-${i}`, labels: { app: "web" } },
      spec: { containers: [{ name: "main", image: "registry.example/web:1.0" }] },
      status: { phase: "Running" },
    });
  }
  // Deployments agentk applies become ready at once (a stand-in for the controller).
  k8s.store.on("change", (ev) => {
    if (ev.resource !== "deployments.apps" || ev.type === "DELETED") return;
    const seen = (ev.object.status as { observedGeneration?: number } | undefined)?.observedGeneration;
    if (seen !== undefined && seen >= (ev.object.metadata.generation ?? 1)) return;
    const { namespace, name } = ev.object.metadata;
    setImmediate(() => {
      try {
        k8s.setDeploymentReady(namespace!, name, true);
      } catch {}
    });
  });

  const configRepo = await GitRepo.init();
  const manifestRepo = await GitRepo.init();
  await configRepo.commit({
    ".gitlab/agents/bench/config.yaml": stringify({
      gitops: {
        manifest_projects: [{ id: PROJECT, default_namespace: "bench-0", paths: [{ glob: "**/*.yaml" }] }],
      },
    }),
  });
  await manifestRepo.commit({ "README.md": "bench\n" });
  const agent = { agentId: 42, projectId: 7, agentName: "bench", repository: configRepo.path };
  kas = await startKasWithAgents(
    dir,
    { [TOKEN]: { ...agent, manifest_projects: { [PROJECT]: manifestRepo.path } } },
    (c) => {
      c.agent.gitops.pollPeriodMs = 3_600_000;
    },
  );
  const k = kas;
  service.listen(0, "127.0.0.1");
  await once(service, "listening");
  const serviceUrl = `http://127.0.0.1:${(service.address() as AddressInfo).port}`;
  const kubeconfig = await k8s.writeKubeconfig(join(dir, "kubeconfig"));
  await writeFile(join(dir, "token"), TOKEN);

  const synced = new Set<string>();
  const child = spawn(
    process.execPath,
    [
      join(root, "dist/cmd/agentk/main.js"),
      `--kas-address=${k.addresses.agent}`,
      `--token-file=${join(dir, "token")}`,
      `--kubeconfig=${kubeconfig}`,
      `--service=prometheus=${serviceUrl}`,
      "--observability-listen-address=127.0.0.1:0",
    ],
    {
      env: { PATH: process.env.PATH, POD_NAME: "agentk-bench", POD_NAMESPACE: "gitlab-agent" },
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  agentk = child;
  const connected = new Promise<void>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`agentk exited with ${code}`)));
    createInterface({ input: child.stdout! }).on("line", (line) => {
      const entry = JSON.parse(line) as { msg?: string; commitId?: string };
      if (entry.msg === "connected to kas") resolve();
      if (entry.msg === "manifest project synced" && entry.commitId) synced.add(entry.commitId);
    });
  });
  await connected;
  const pid = child.pid!;
  log(`agentk (pid ${pid}) connected; warming up`);

  let jwt = await gitlabJwt(k.apiSecret);
  setInterval(async () => {
    jwt = await gitlabJwt(k.apiSecret);
  }, 30_000).unref();
  const kubeGet = (path: string) =>
    fetch(`${k.addresses.kubernetesApi}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const serviceGet = () =>
    fetch(`${k.addresses.api}/api/v1/agents/42/services/prometheus/metrics`, {
      headers: { "gitlab-kas-api-request": jwt },
    });
  const push = () =>
    fetch(`${k.addresses.api}/api/v1/notifications/git_push`, {
      method: "POST",
      body: JSON.stringify({ project: { full_path: PROJECT } }),
      headers: { "content-type": "application/json", "gitlab-kas-api-request": jwt },
    });
  let roundNo = 0;
  /** One GitOps round: a commit changing every object, the push notification, agentk's sync. */
  const gitopsRound = async () => {
    const r = `r${++roundNo}`;
    const byFile = manifests(OBJECTS, r, { namespaces: 4, nsPrefix: "bench-", filePerObject: false });
    const files = Object.fromEntries(
      [...byFile].map(([f, docs]) => [f, docs.map((d) => stringify(d)).join("---\n")]),
    );
    const commit = await manifestRepo.commit(files, { message: r });
    await push();
    const until = Date.now() + 60_000;
    while (!synced.has(commit)) {
      if (Date.now() > until) throw new Error(`agentk did not sync ${r} within 60 s`);
      await sleep(50);
    }
  };
  // Warm-up: the first sync creates the objects; a few requests of each kind.
  await gitopsRound();
  for (let i = 0; i < 20; i++) await Promise.all([kubeGet("/api/v1/namespaces/default/pods"), serviceGet()]);

  async function measure(name: string, load: boolean): Promise<Phase> {
    const phase: Phase = {
      name,
      requests: 0,
      errors: 0,
      syncs: 0,
      rssMiB: [],
      cpuMillicores: [],
      cpuTotalS: 0,
      seconds: 0,
    };
    const cpu0 = cpuSeconds(pid);
    const t0 = performance.now();
    const end = t0 + SECONDS * 1000;
    let stop = false;
    const sampler = (async () => {
      let lastCpu = cpu0;
      let last = t0;
      while (!stop) {
        await sleep(250);
        phase.rssMiB.push(rssKiB(pid) / 1024);
        if (performance.now() - last >= 1000) {
          const cpu = cpuSeconds(pid);
          const now = performance.now();
          phase.cpuMillicores.push(((cpu - lastCpu) / ((now - last) / 1000)) * 1000);
          lastCpu = cpu;
          last = now;
        }
      }
    })();
    const work: Promise<void>[] = [];
    if (load) {
      for (let c = 0; c < CLIENTS; c++) {
        work.push(
          (async () => {
            for (let i = 0; performance.now() < end; i++) {
              const res = await (i % 2 === 0
                ? kubeGet(
                    i % 4 === 0
                      ? "/api/v1/namespaces/default/pods"
                      : "/apis/apps/v1/namespaces/bench-0/deployments",
                  )
                : serviceGet());
              const body = await res.text();
              if (res.ok) phase.requests++;
              else {
                phase.errors++;
                if (phase.errors === 1) log(`  first failed request: ${res.status} ${body.slice(0, 200)}`);
              }
            }
          })(),
        );
      }
      work.push(
        (async () => {
          while (performance.now() < end) {
            const next = performance.now() + 5000;
            await gitopsRound();
            phase.syncs++;
            await sleep(Math.max(0, next - performance.now()));
          }
        })(),
      );
    }
    await Promise.all([sleep(Math.max(0, end - performance.now())), ...work]);
    stop = true;
    await sampler;
    phase.seconds = (performance.now() - t0) / 1000;
    phase.cpuTotalS = cpuSeconds(pid) - cpu0;
    return phase;
  }

  log(`measuring: idle ${SECONDS} s`);
  const idle = await measure("idle (connected)", false);
  log(`measuring: load ${SECONDS} s (${CLIENTS} clients, a sync of ${OBJECTS} objects every 5 s)`);
  const loaded = await measure("load", true);

  const row = (p: Phase) => ({
    phase: p.name,
    requestsPerS: round(p.requests / p.seconds, 0),
    errors: p.errors,
    syncs: p.syncs,
    rssP50MiB: round(percentile(p.rssMiB, 50), 0),
    rssMaxMiB: round(Math.max(...p.rssMiB), 0),
    cpuAvgMillicores: round((p.cpuTotalS / p.seconds) * 1000, 0),
    cpuP95Millicores: round(percentile(p.cpuMillicores, 95), 0),
    cpuMaxMillicores: round(Math.max(...p.cpuMillicores), 0),
  });
  const rows = [row(idle), row(loaded)];
  if (args.json) {
    console.log(JSON.stringify({ seconds: SECONDS, objects: OBJECTS, clients: CLIENTS, rows }, null, 2));
  } else {
    console.log(
      markdownTable(
        [
          "phase",
          "req/s",
          "failed",
          "GitOps syncs",
          "RSS p50 MiB",
          "RSS max MiB",
          "CPU avg m",
          "CPU p95 (1 s) m",
          "CPU max (1 s) m",
        ],
        rows.map((r) => [
          r.phase,
          r.requestsPerS,
          r.errors,
          r.syncs,
          r.rssP50MiB,
          r.rssMaxMiB,
          r.cpuAvgMillicores,
          r.cpuP95Millicores,
          r.cpuMaxMillicores,
        ]),
      ),
    );
    console.log(
      `\nload vs idle: RSS max +${round(rows[1]!.rssMaxMiB - rows[0]!.rssMaxMiB, 0)} MiB, CPU avg x${round(rows[1]!.cpuAvgMillicores / Math.max(1, rows[0]!.cpuAvgMillicores), 1)}`,
    );
  }
} finally {
  if (agentk && agentk.exitCode === null) {
    agentk.kill("SIGTERM");
    await once(agentk, "exit");
  }
  service.close();
  await kas?.close();
  await kube?.close();
  await rm(dir, { recursive: true, force: true });
}
process.exit(0);
