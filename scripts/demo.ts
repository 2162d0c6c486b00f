// npm run demo [-- --once]
// kas and agentk on built-in defaults, as two processes on this machine: agentk dials ONE tunnel to
// kas; requests then go kas -> tunnel -> agentk -> an in-cluster service (a stand-in Prometheus),
// and, when a kubeconfig is found, to the Kubernetes API through kas's Kubernetes API proxy.
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

const { values: args } = parseArgs({ options: { once: { type: "boolean", default: false } } });
const root = new URL("..", import.meta.url).pathname;
const say = (who: string, what: string) => console.log(`${who.padEnd(7)} ${what}`);
const AGENT_TOKEN = randomBytes(24).toString("base64url");

// Files kas and agentk read: the dev token (static tokens file), GitLab's API secret.
const dir = await mkdtemp(join(tmpdir(), "kas-demo-"));
const apiSecret = randomBytes(32);
await writeFile(join(dir, "tokens.yaml"), `${AGENT_TOKEN}: {agentId: 1, projectId: 1, agentName: demo}\n`);
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

const children: ChildProcess[] = [];
/** Starts a daemon; resolves with its first JSON log line that `match`es. */
function start(name: string, script: string, argv: string[], env: Record<string, string>, match: string) {
  const child = spawn(process.execPath, ["--import", "tsx", join(root, script), ...argv], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.push(child);
  return new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not log "${match}" within 60 s`)), 60_000);
    child.once("exit", (code) => reject(new Error(`${name} exited with code ${code}`)));
    createInterface({ input: child.stdout! }).on("line", (line) => {
      const entry = JSON.parse(line) as Record<string, unknown>;
      if ((entry.level as number) >= 40) say(name, `${entry.msg} ${entry.err ?? ""}`);
      if (entry.msg === match) {
        clearTimeout(timer);
        resolve(entry);
      }
    });
  });
}

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
);
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
await start("agentk", "cmd/agentk/main.ts", agentArgs, agentEnv, "connected to kas").catch(async (err) => {
  say("demo", `failed: ${err.message}`);
  await stop(1);
  process.exit(1);
});
say("agentk", "connected: one outbound WebSocket to kas, nothing listening in the cluster");

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

let stopping = false;
async function stop(code: number): Promise<void> {
  if (stopping) return;
  stopping = true;
  say("demo", "stopping: agentk, then kas (GoAway, streams finish, exit 0)");
  for (const child of [...children].reverse()) {
    if (child.exitCode !== null) continue;
    child.kill("SIGTERM");
    const [exit] = await once(child, "exit");
    say("demo", `${children.indexOf(child) === 0 ? "kas" : "agentk"} exited with code ${exit}`);
  }
  prometheus.close();
  await rm(dir, { recursive: true, force: true });
  process.exitCode = code;
}
process.once("SIGINT", () => void stop(0));
process.once("SIGTERM", () => void stop(0));

try {
  await round();
  if (args.once) await stop(0);
  else {
    say("demo", "a round every 5 s; Ctrl-C to stop");
    const timer = setInterval(
      () => void round().catch((err) => say("demo", `round failed: ${err.message}`)),
      5000,
    );
    process.once("SIGINT", () => clearInterval(timer));
    process.once("SIGTERM", () => clearInterval(timer));
  }
} catch (err) {
  say("demo", `failed: ${(err as Error).message}`);
  await stop(1);
}
