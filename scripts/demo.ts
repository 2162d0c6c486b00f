// npm run demo [-- --once]
// kas and agentk on built-in defaults, as two processes on this machine: agentk dials ONE tunnel to
// kas; requests then go kas -> tunnel -> agentk -> an in-cluster service (a stand-in Prometheus),
// and, when a kubeconfig is found, to the Kubernetes API through kas's Kubernetes API proxy. The
// agent's configuration comes from a local git repository (its configuration project): each round
// commits a new log level, tells kas of the push as GitLab would, and agentk applies it live.
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
import { ConfigProject } from "./demo-git.ts";

const { values: args } = parseArgs({ options: { once: { type: "boolean", default: false } } });
const root = new URL("..", import.meta.url).pathname;
const say = (who: string, what: string) => console.log(`${who.padEnd(7)} ${what}`);
const AGENT_TOKEN = randomBytes(24).toString("base64url");

// The agent's configuration project: a git repository holding .gitlab/agents/demo/config.yaml.
const dir = await mkdtemp(join(tmpdir(), "kas-demo-"));
const CONFIG_FILE = ".gitlab/agents/demo/config.yaml";
const configYaml = (level: string) => `observability:\n  logging:\n    level: ${level}\n`;
const short = (commit: unknown) => String(commit).slice(0, 8);
let level = "info";
const [project, firstCommit] = await (async () => {
  const project = await ConfigProject.init(join(dir, "config-project"));
  return [
    project,
    await project.commit(CONFIG_FILE, configYaml(level), "agent demo: log level info"),
  ] as const;
})().catch(async (err) => {
  say("demo", `failed: cannot make the configuration project with the git CLI: ${err.message}`);
  await rm(dir, { recursive: true, force: true });
  process.exit(1);
});
say("git", `configuration project ${project.path}: ${CONFIG_FILE} at ${short(firstCommit)} (level ${level})`);

// Files kas and agentk read: the dev token (static tokens file, naming the configuration project),
// GitLab's API secret.
const apiSecret = randomBytes(32);
await writeFile(
  join(dir, "tokens.yaml"),
  `${AGENT_TOKEN}: {agentId: 1, projectId: 1, agentName: demo, repository: ${JSON.stringify(project.path)}}\n`,
);
await writeFile(join(dir, "api_secret"), apiSecret.toString("base64"));
await writeFile(join(dir, "agent_token"), AGENT_TOKEN);

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
  if ((entry.level as number) >= 40) say(who, `${entry.msg} ${entry.err ?? ""}`);
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
/** Stops agentk, then kas, removes the temp dir and exits with `code` (the first call's). */
function stop(code: number): Promise<never> {
  stopping = true;
  stopped ??= stopAndExit(code);
  return stopped;
}
async function stopAndExit(code: number): Promise<never> {
  clearTimeout(nextRound);
  for (const w of waiters) clearTimeout(w.timer);
  waiters.clear();
  say("demo", "stopping: agentk, then kas (GoAway, streams finish, exit 0)");
  for (const { name, child, exited } of [...children].reverse()) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    say("demo", `${name} exited with ${await exited}`);
  }
  prometheus.close();
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
  },
  "kas listening",
).catch(failed);
const kas = kasReady.addresses as {
  agent: string;
  api: string;
  kubernetesApi: string;
  observability: string;
};
say(
  "kas",
  `agents connect to ${kas.agent}; GitLab's API at ${kas.api}; Kubernetes API proxy at ${kas.kubernetesApi}`,
);

const kubeconfig = process.env.KUBECONFIG ?? join(homedir(), ".kube", "config");
const haveKube = existsSync(kubeconfig.split(":")[0]!);
const agentArgs = ["--kas-address", kas.agent, "--token-file", join(dir, "agent_token")];
agentArgs.push("--service", `prometheus=${prometheusUrl}`, "--observability-listen-address", "127.0.0.1:0");
if (haveKube) agentArgs.push("--kubeconfig", kubeconfig);
// agentk reads KUBECONFIG itself: hand it on only when the file is there.
// agentk names its pod to kas, which lists it with the agent (as in a cluster, through the downward API).
const agentEnv: Record<string, string> = {
  KUBECONFIG: haveKube ? kubeconfig : "",
  POD_NAME: "agentk-demo",
  POD_NAMESPACE: "gitlab-agent",
};
await start("agentk", "cmd/agentk/main.ts", agentArgs, agentEnv, "connected to kas").catch(failed);
say("agentk", "connected: one outbound WebSocket to kas, nothing listening in the cluster");
const applied = await logged(
  "agentk",
  "agent configuration applied",
  (e) => e.commitId === firstCommit,
).catch(failed);
say(
  "agentk",
  `agent configuration applied: commit ${short(applied.commitId)}, log level ${applied.logLevel}`,
);

const gitlabJwt = () =>
  new SignJWT({})
    .setProtectedHeader({ alg: "HS256" })
    .setIssuer("gitlab")
    .setAudience("gitlab-kas")
    .setIssuedAt()
    .setExpirationTime("1m")
    .sign(apiSecret);
const httpOf = (address: string) => address.replace(/^ws/, "http");

async function round(): Promise<void> {
  await tunnelRound();
  await configurationRound();
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
  if (!haveKube) {
    say(
      "kube",
      `no kubeconfig at ${kubeconfig}: skipping the Kubernetes API proxy (set KUBECONFIG to try it)`,
    );
    return;
  }
  const k8s = await fetch(`${httpOf(kas.kubernetesApi)}/api/v1/namespaces`, {
    headers: { authorization: `Bearer ${AGENT_TOKEN}` },
  });
  const body = (await k8s.json()) as { items?: Array<{ metadata: { name: string } }>; message?: string };
  const names = body.items?.map((n) => n.metadata.name).join(", ") ?? body.message;
  say("kube", `GET /api/v1/namespaces through kas's Kubernetes API proxy -> ${k8s.status}: ${names}`);
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
  const body = JSON.stringify({ project: { id: 1 } });
  const res = await fetch(`${api}/api/v1/notifications/git_push`, {
    method: "POST",
    body,
    headers: { "gitlab-kas-api-request": await gitlabJwt(), "content-type": "application/json" },
  });
  say("gitlab", `POST /api/v1/notifications/git_push ${body} -> ${res.status}`);
  const entry = await applied;
  say("agentk", `agent configuration applied: commit ${short(entry.commitId)}, log level ${entry.logLevel}`);
  await showConfiguration();
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
