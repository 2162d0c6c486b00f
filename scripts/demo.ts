// npm run demo [-- --once]
// kas and agentk on built-in defaults, as two processes on this machine: agentk dials ONE tunnel to
// kas; requests then go kas -> tunnel -> agentk -> an in-cluster service (a stand-in Prometheus),
// and to the Kubernetes API through kas's Kubernetes API proxy. The agent's configuration comes
// from a local git repository (its configuration project): each round commits a new log level,
// tells kas of the push as GitLab would, and agentk applies it live. Without a kubeconfig, the
// "cluster" is a stand-in (the Kubernetes API test server, in the demo's process), and GitOps joins
// in: agentk applies a local manifest project to it, and each round changes a manifest and pushes.
// With a real kubeconfig, GitOps stays out (the demo writes nothing to a real cluster).
// kas also serves its live dashboard (URL and login token printed); on the stand-in, the cluster
// changes every few seconds so that the page moves (scripts/demo-dashboard.ts).
// Ctrl-C stops everything cleanly.
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { SignJWT } from "jose";
import { fetch } from "undici";
import { type KubeApiServer, startKubeApiServer } from "../test/support/kube-apiserver.ts";
import {
  changeClusterEvery,
  clusterViewsConfigYaml,
  dashboardSettings,
  seedDemoCluster,
} from "./demo-dashboard.ts";
import { ConfigProject } from "./demo-git.ts";
import {
  CONFIGMAP_FILE,
  configMapYaml,
  gitopsConfigYaml,
  MANIFEST_PROJECT,
  NAMESPACE_FILE,
  namespaceYaml,
  showGitops,
  showObjects,
} from "./demo-gitops.ts";
import { kasKubeconfig, kubectlGetPods } from "./demo-kubectl.ts";

const { values: args } = parseArgs({ options: { once: { type: "boolean", default: false } } });
const root = new URL("..", import.meta.url).pathname;
const say = (who: string, what: string) => console.log(`${who.padEnd(7)} ${what}`);
const AGENT_TOKEN = randomBytes(24).toString("base64url");

// The agent's configuration project: a git repository holding .gitlab/agents/demo/config.yaml.
const dir = await mkdtemp(join(tmpdir(), "kas-demo-"));
const kubeconfig = process.env.KUBECONFIG ?? join(homedir(), ".kube", "config");
// A real cluster is never written to: GitOps runs against the stand-in only.
const haveKube = existsSync(kubeconfig.split(":")[0]!);
const gitops = !haveKube;
const CONFIG_FILE = ".gitlab/agents/demo/config.yaml";
const configYaml = (level: string) =>
  `observability:\n  logging:\n    level: ${level}\n${gitops ? gitopsConfigYaml : ""}${clusterViewsConfigYaml}`;
const short = (commit: unknown) => String(commit).slice(0, 8);
let level = "info";
let greetings = 1;
const greeting = () => `hello from commit ${greetings}`;
let standIn: KubeApiServer | undefined;
const [project, firstCommit, manifests, firstManifestCommit] = await (async () => {
  const project = await ConfigProject.init(join(dir, "config-project"));
  const first = await project.commit(CONFIG_FILE, configYaml(level), "agent demo: log level info");
  if (!gitops) return [project, first, undefined, undefined] as const;
  const manifests = await ConfigProject.init(join(dir, "manifest-project"));
  await manifests.commit(NAMESPACE_FILE, namespaceYaml, "demo: the demo namespace");
  const manifestCommit = await manifests.commit(
    CONFIGMAP_FILE,
    configMapYaml(greeting()),
    "demo: a greeting",
  );
  return [project, first, manifests, manifestCommit] as const;
})().catch(async (err) => {
  say("demo", `failed: cannot make the demo's git projects with the git CLI: ${err.message}`);
  await rm(dir, { recursive: true, force: true });
  process.exit(1);
});
say("git", `configuration project ${project.path}: ${CONFIG_FILE} at ${short(firstCommit)} (level ${level})`);
if (manifests) {
  say(
    "git",
    `manifest project ${MANIFEST_PROJECT} at ${manifests.path}: ${NAMESPACE_FILE}, ${CONFIGMAP_FILE} at ${short(firstManifestCommit)}`,
  );
}

/** What the stand-in cluster does not do, said once at start (test/support/kube/README.md lists it all). */
const STAND_IN_LIMITS =
  "stores objects and answers kubectl, but runs nothing: no kubelet, no controllers (a Deployment makes no pods; the pods shown are the demo's, agentk's marked ready when it connects), no scheduling; `kubectl port-forward` reaches a greeting-and-echo port, not a process; `kubectl exec` knows a few built-in commands; no `kubectl explain`, attach, pagination, finalizers, admission or authorization (one token, all allowed)";

/** agentk's pod as the stand-in shows it, its container ready or not (as its readiness probe would say). */
function agentkPod(ready: boolean) {
  const condition = (type: string, status: boolean) => ({ type, status: status ? "True" : "False" });
  return {
    metadata: { name: "agentk-demo", labels: { "app.kubernetes.io/name": "agentk" } },
    spec: { nodeName: "node-1", containers: [{ name: "agentk", image: "agentk" }] },
    status: {
      phase: "Running",
      conditions: [
        condition("PodScheduled", true),
        condition("ContainersReady", ready),
        condition("Ready", ready),
      ],
      containerStatuses: [
        { name: "agentk", image: "agentk", ready, started: true, restartCount: 0, state: { running: {} } },
      ],
    },
  };
}

// No kubeconfig: the Kubernetes API test server stands in for a cluster, in this process.
const agentKubeconfig = haveKube ? kubeconfig : join(dir, "kubeconfig");
if (!haveKube) {
  try {
    standIn = await startKubeApiServer();
    // agentk's own namespace, as in a cluster (its leader-election Lease lives there).
    standIn.store.create("namespaces", undefined, { metadata: { name: "gitlab-agent" } });
    // agentk's pod, as `kubectl get pods -A` through kas shows it: Running, not yet ready (no tunnel
    // to kas yet); marked ready once agentk connects, as a kubelet does when its readiness probe passes.
    standIn.store.create("pods", "gitlab-agent", agentkPod(false));
    seedDemoCluster(standIn.store); // nodes, Deployments and pods for the dashboard's views
    await standIn.writeKubeconfig(agentKubeconfig);
  } catch (err) {
    say("demo", `failed: cannot start the Kubernetes API test server: ${(err as Error).message}`);
    await standIn?.close();
    await rm(dir, { recursive: true, force: true });
    process.exit(1);
  }
  say(
    "kube",
    `no kubeconfig at ${kubeconfig}: a STAND-IN for a cluster at ${standIn.url} (the Kubernetes API test server of test/support/kube, in this process; not Kubernetes)`,
  );
  say("kube", `the stand-in ${STAND_IN_LIMITS}`);
} else {
  say(
    "kube",
    `kubeconfig ${kubeconfig}: a real cluster, so GitOps is left out of this demo (nothing is written to it)`,
  );
}

// Files kas and agentk read: the dev token (static tokens file, naming the configuration project
// and, with GitOps, the manifest project), GitLab's API secret.
const apiSecret = randomBytes(32);
const manifestProjects = manifests
  ? `, manifest_projects: {${JSON.stringify(MANIFEST_PROJECT)}: ${JSON.stringify(manifests.path)}}`
  : "";
await writeFile(
  join(dir, "tokens.yaml"),
  `${AGENT_TOKEN}: {agentId: 1, projectId: 1, agentName: demo, repository: ${JSON.stringify(project.path)}${manifestProjects}}\n`,
);
await writeFile(join(dir, "api_secret"), apiSecret.toString("base64"));
await writeFile(join(dir, "agent_token"), AGENT_TOKEN);
const dashboard = await dashboardSettings(dir);

// The in-cluster service: listens on loopback only, reachable from "outside" through agentk alone.
let scrapes = 0;
const prometheus = createServer((req, res) => {
  scrapes++;
  res.setHeader("content-type", "text/plain; version=0.0.4");
  res.end(`# TYPE demo_scrapes_total counter\ndemo_scrapes_total{path="${req.url}"} ${scrapes}\n`);
}).listen(0, "127.0.0.1");
await once(prometheus, "listening");
const prometheusUrl = `http://127.0.0.1:${(prometheus.address() as AddressInfo).port}`;

type LogEntry = Record<string, unknown>;
interface Waiter {
  who: string;
  msg: string;
  test: (entry: LogEntry) => boolean;
  resolve: (entry: LogEntry) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}
const waiters = new Set<Waiter>();
/** The latest line of each daemon and message (`${who} ${msg}`), so a wait never misses it. */
const latest = new Map<string, LogEntry>();

/** Resolves with `who`'s latest (or next) JSON log line `msg` that passes `test`. */
function logged(who: string, msg: string, test: (e: LogEntry) => boolean = () => true, timeoutMs = 15_000) {
  const seen = latest.get(`${who} ${msg}`);
  if (seen && test(seen)) return Promise.resolve(seen);
  return new Promise<LogEntry>((resolve, reject) => {
    const timer = setTimeout(() => {
      waiters.delete(waiter);
      reject(new Error(`${who} did not log "${msg}" within ${timeoutMs / 1000} s`));
    }, timeoutMs);
    const waiter: Waiter = { who, msg, test, resolve, reject, timer };
    waiters.add(waiter);
  });
}

function onLogLine(who: string, line: string): void {
  let entry: LogEntry;
  try {
    entry = JSON.parse(line) as LogEntry;
  } catch {
    say(who, line);
    return;
  }
  if ((entry.level as number) >= 40) {
    const err = entry.err as { message?: string } | string | undefined;
    say(who, `${entry.msg} ${typeof err === "object" ? (err.message ?? JSON.stringify(err)) : (err ?? "")}`);
  }
  latest.set(`${who} ${entry.msg}`, entry);
  for (const w of waiters) {
    if (w.who !== who || w.msg !== entry.msg || !w.test(entry)) continue;
    clearTimeout(w.timer);
    waiters.delete(w);
    w.resolve(entry);
  }
}

const children: Array<{ name: string; child: ChildProcess; exited: Promise<string> }> = [];
/** Starts a daemon; resolves with its first JSON log line that `match`es. */
function start(name: string, script: string, argv: string[], env: Record<string, string>, match: string) {
  const child = spawn(process.execPath, ["--import", "tsx", join(root, script), ...argv], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"],
    // Their own process group: a Ctrl-C reaches the demo alone, which stops agentk, then kas.
    detached: true,
  });
  // Recorded from the start: a daemon may be gone before stop() looks.
  const exited = new Promise<string>((resolve) =>
    child.once("exit", (code, signal) => resolve(code === null ? `signal ${signal}` : `code ${code}`)),
  );
  children.push({ name, child, exited });
  createInterface({ input: child.stdout! }).on("line", (line) => onLogLine(name, line));
  return new Promise<LogEntry>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`${name} exited with code ${code}`)));
    logged(name, match, () => true, 60_000).then(resolve, reject);
  });
}

let stopping = false;
let stopped: Promise<never> | undefined;
let nextRound: NodeJS.Timeout | undefined;
let stopChanges: (() => void) | undefined;
/** Stops agentk, then kas, removes the temp dir and exits with `code` (the first call's). */
function stop(code: number): Promise<never> {
  stopping = true;
  stopped ??= stopAndExit(code);
  return stopped;
}
async function stopAndExit(code: number): Promise<never> {
  clearTimeout(nextRound);
  stopChanges?.();
  for (const w of waiters) clearTimeout(w.timer);
  waiters.clear();
  say("demo", "stopping: agentk, then kas (GoAway, streams finish, exit 0)");
  for (const { name, child, exited } of [...children].reverse()) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    say("demo", `${name} exited with ${await exited}`);
  }
  prometheus.close();
  await standIn?.close();
  await rm(dir, { recursive: true, force: true });
  process.exit(code);
}
// Listeners that stay: a second Ctrl-C while stopping must not end the demo before its cleanup.
process.on("SIGINT", () => void stop(0));
process.on("SIGTERM", () => void stop(0));
// Should the demo die anyway, its daemons (in their own process group) go with it.
process.on("exit", () => {
  for (const { child } of children) if (child.exitCode === null && child.signalCode === null) child.kill();
});

/** A failure while starting up: say so (unless Ctrl-C caused it), stop, exit 1. */
const failed = (err: Error) => {
  if (!stopping) say("demo", `failed: ${err.message}`);
  return stop(1);
};

const kasReady = await start(
  "kas",
  "cmd/kas/main.ts",
  [],
  {
    KAS_AGENT_STATIC_TOKENS_FILE: join(dir, "tokens.yaml"),
    KAS_API_LISTEN_AUTHENTICATION_SECRET_FILE: join(dir, "api_secret"),
    // Ephemeral loopback ports, so the demo never collides with a kas already running here.
    KAS_AGENT_LISTEN_ADDRESS: "127.0.0.1:0",
    KAS_API_LISTEN_ADDRESS: "127.0.0.1:0",
    KAS_AGENT_KUBERNETES_API_LISTEN_ADDRESS: "127.0.0.1:0",
    KAS_OBSERVABILITY_LISTEN_ADDRESS: "127.0.0.1:0",
    KAS_DATA_DIR: join(dir, "kas-data"),
    ...dashboard.env,
  },
  "kas listening",
).catch(failed);
const kas = kasReady.addresses as {
  agent: string;
  api: string;
  kubernetesApi: string;
  observability: string;
  dashboard: string;
};
say(
  "kas",
  `agents connect to ${kas.agent}; GitLab's API at ${kas.api}; Kubernetes API proxy at ${kas.kubernetesApi}`,
);

// kubectl as a newcomer: kas made its proxy a certificate (TLS); `kas kubeconfig` prints a kubeconfig.
const kasKubeconfigFile = join(dir, "kas-kubeconfig");
const kasEnv = {
  KAS_AGENT_STATIC_TOKENS_FILE: join(dir, "tokens.yaml"),
  KAS_DATA_DIR: join(dir, "kas-data"),
};
await kasKubeconfig(root, kasEnv, kas.kubernetesApi, kasKubeconfigFile).catch(failed);
say("kas", `kas kubeconfig --agent-id 1 > ${kasKubeconfigFile} (kas's CA, its URL, the dev token)`);

const agentArgs = ["--kas-address", kas.agent, "--token-file", join(dir, "agent_token")];
agentArgs.push("--service", `prometheus=${prometheusUrl}`, "--observability-listen-address", "127.0.0.1:0");
agentArgs.push("--kubeconfig", agentKubeconfig);
// agentk names its pod to kas, which lists it with the agent (as in a cluster, through the downward API).
const agentEnv: Record<string, string> = {
  KUBECONFIG: agentKubeconfig,
  POD_NAME: "agentk-demo",
  POD_NAMESPACE: "gitlab-agent",
};
await start("agentk", "cmd/agentk/main.ts", agentArgs, agentEnv, "connected to kas").catch(failed);
say("agentk", "connected: one outbound WebSocket to kas, nothing listening in the cluster");
// Its readiness (/readiness: a tunnel to kas is up) now passes: the stand-in's pod says so.
standIn?.store.update("pods", "gitlab-agent", "agentk-demo", { status: agentkPod(true).status });
say("kas", `DASHBOARD: open ${kas.dashboard}/ and log in with the token ${dashboard.token}`);
if (standIn && !args.once) {
  say(
    "kube",
    "the stand-in cluster changes every 4 s (Deployments scaled, a node NotReady, warnings): watch the dashboard",
  );
  const store = standIn.store;
  stopChanges = changeClusterEvery(store, 4000, (what) => say("kube", what));
}
const applied = await logged(
  "agentk",
  "agent configuration applied",
  (e) => e.commitId === firstCommit,
).catch(failed);
say(
  "agentk",
  `agent configuration applied: commit ${short(applied.commitId)}, log level ${applied.logLevel}`,
);
if (gitops) {
  const synced = await logged(
    "agentk",
    "manifest project synced",
    (e) => e.commitId === firstManifestCommit,
    30_000,
  ).catch(failed);
  say(
    "agentk",
    `manifest project ${MANIFEST_PROJECT} synced: commit ${short(synced.commitId)}, ${counts(synced)}`,
  );
}

const gitlabJwt = () =>
  new SignJWT({})
    .setProtectedHeader({ alg: "HS256" })
    .setIssuer("gitlab")
    .setAudience("gitlab-kas")
    .setIssuedAt()
    .setExpirationTime("1m")
    .sign(apiSecret);
const httpOf = (address: string) => address.replace(/^ws/, "http");
/** The object counts of agentk's "manifest project synced" line: `applied 2, unchanged 1`. */
function counts(entry: LogEntry): string {
  const statuses = ["applied", "unchanged", "pruned", "skipped", "failed"].filter(
    (s) => entry[s] !== undefined,
  );
  return statuses.map((s) => `${s} ${entry[s]}`).join(", ") || "no objects";
}

async function round(): Promise<void> {
  await tunnelRound();
  say("kubectl", `KUBECONFIG=${kasKubeconfigFile} kubectl get pods -A`);
  for (const line of await kubectlGetPods(kasKubeconfigFile)) say("kubectl", line);
  await configurationRound();
  if (gitops) await gitopsRound();
}

async function tunnelRound(): Promise<void> {
  const api = httpOf(kas.api);
  const headers = { "gitlab-kas-api-request": await gitlabJwt() };
  const listAgents = async () =>
    (
      (await (await fetch(`${api}/api/v1/agents`, { headers })).json()) as {
        agents: Array<{ pods?: unknown }>;
      }
    ).agents;
  // agentk reports its pod over its gRPC channel just after connecting: give it a moment (2 s at most).
  let agents = await listAgents();
  for (let i = 0; i < 20 && agents[0] && !agents[0].pods; i++) {
    await new Promise((r) => setTimeout(r, 100));
    agents = await listAgents();
  }
  say("gitlab", `GET /api/v1/agents -> ${JSON.stringify(agents)}`);
  const res = await fetch(`${api}/api/v1/agents/1/services/prometheus/metrics`, { headers });
  const last = (await res.text()).trim().split("\n").at(-1);
  say("gitlab", `GET /api/v1/agents/1/services/prometheus/metrics -> ${res.status}: ${last}`);
  const k8s = await fetch(`${httpOf(kas.kubernetesApi)}/api/v1/namespaces`, {
    headers: { authorization: `Bearer ${AGENT_TOKEN}` },
  });
  const body = (await k8s.json()) as { items?: Array<{ metadata: { name: string } }>; message?: string };
  const names = body.items?.map((n) => n.metadata.name).join(", ") ?? body.message;
  const where = standIn ? "the stand-in cluster" : "the cluster";
  say(
    "kube",
    `GET /api/v1/namespaces of ${where} through kas's Kubernetes API proxy -> ${k8s.status}: ${names}`,
  );
}

/** What GitLab's API shows of the agent's configuration, then a commit, a push, and agentk applying it. */
async function configurationRound(): Promise<void> {
  const api = httpOf(kas.api);
  const showConfiguration = async () => {
    const path = "/api/v1/agents/1/configuration";
    const res = await fetch(`${api}${path}`, { headers: { "gitlab-kas-api-request": await gitlabJwt() } });
    const body = (await res.json()) as {
      commit_id?: string | null;
      configuration?: { observability?: { logging?: { level?: string } } } | null;
      last_error?: { message: string };
      message?: string;
    };
    const shown = res.ok
      ? `commit ${short(body.commit_id)}, observability.logging.level ${body.configuration?.observability?.logging?.level}`
      : body.message;
    const error = body.last_error ? `; last error: ${body.last_error.message}` : "";
    say("gitlab", `GET ${path} -> ${res.status}: ${shown}${error}`);
  };
  await showConfiguration();

  level = level === "debug" ? "info" : "debug";
  const commit = await project.commit(CONFIG_FILE, configYaml(level), `agent demo: log level ${level}`);
  say("git", `commit ${short(commit)}: ${CONFIG_FILE} now sets observability.logging.level: ${level}`);
  const applied = logged("agentk", "agent configuration applied", (e) => e.commitId === commit);
  applied.catch(() => {}); // awaited below, after the notification
  await notifyPush(api, { id: 1 });
  const entry = await applied;
  say("agentk", `agent configuration applied: commit ${short(entry.commitId)}, log level ${entry.logLevel}`);
  await showConfiguration();
}

/** GitLab's git push notification for `project`, as GitLab sends it, told on the console. */
async function notifyPush(api: string, project: { id: number } | { full_path: string }): Promise<void> {
  const body = JSON.stringify({ project });
  const res = await fetch(`${api}/api/v1/notifications/git_push`, {
    method: "POST",
    body,
    headers: { "gitlab-kas-api-request": await gitlabJwt(), "content-type": "application/json" },
  });
  say("gitlab", `POST /api/v1/notifications/git_push ${body} -> ${res.status}`);
}

/** The objects in the stand-in cluster and kas's GitOps status, then a manifest change, a push, and agentk applying it. */
async function gitopsRound(): Promise<void> {
  const api = httpOf(kas.api);
  const kubernetesApi = httpOf(kas.kubernetesApi);
  const show = async () => {
    for (const line of await showObjects(kubernetesApi, AGENT_TOKEN)) say("kube", line);
    const headers = { "gitlab-kas-api-request": await gitlabJwt() };
    for (const line of await showGitops(api, headers)) say("gitlab", line);
  };
  await show();

  greetings++;
  const commit = await manifests!.commit(CONFIGMAP_FILE, configMapYaml(greeting()), "demo: a new greeting");
  say("git", `commit ${short(commit)}: ${CONFIGMAP_FILE} now sets greeting: "${greeting()}"`);
  const synced = logged("agentk", "manifest project synced", (e) => e.commitId === commit);
  synced.catch(() => {}); // awaited below, after the notification
  await notifyPush(api, { full_path: MANIFEST_PROJECT });
  const entry = await synced;
  say(
    "agentk",
    `manifest project ${MANIFEST_PROJECT} synced: commit ${short(entry.commitId)}, ${counts(entry)}`,
  );
  await show();
}

// Rounds one after another (a slow one is never overlapped by the next), until Ctrl-C.
function schedule(): void {
  if (stopping) return;
  nextRound = setTimeout(
    () =>
      void round()
        .catch((err) => stopping || say("demo", `round failed: ${err.message}`))
        .finally(schedule),
    5000,
  );
}

try {
  await round();
  if (args.once) await stop(0);
  else {
    say("demo", "a round every 5 s; Ctrl-C to stop");
    schedule();
  }
} catch (err) {
  await failed(err as Error);
}
