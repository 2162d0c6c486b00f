// `kubectl get pods` as its list request (GET /api/v1/namespaces/default/pods, asking for a Table)
// through kas's Kubernetes API proxy with a CI job's token (GitLab's allowed_agents, the agent's
// ci_access, impersonation as gitlab:ci_job:<id>) and agentk, against the same request straight to
// the Kubernetes test server. Counts GitLab's authorization calls: a cold burst of concurrent
// requests shares one lookup, and the warm cache asks no more. Also the floor under the kas path:
// the same request through two bare Node.js proxies in a chain (bare-proxies.ts).
import { Agent, type Dispatcher } from "undici";
import { startKubeProxySetup } from "../../test/support/kube-proxy-setup.ts";
import { testPki } from "../../test/support/tls-certs.ts";
import { startBareProxies } from "./bare-proxies.ts";

export interface KubeListRun {
  /** Latency of each request, ms. */
  direct: number[];
  kas: number[];
  /** Two bare Node.js proxies in a chain, nothing else (the kas path's floor). */
  bare: number[];
  /** Calls to GitLab's allowed_agents / authorize_proxy_user during the run. */
  gitlabAuthCalls: number;
  /** How long the run took, and kas's cache TTL for GitLab's answers: at most one call per TTL started. */
  elapsedMs: number;
  ttlMs: number;
}

const JOB_TOKEN = "bench-job-token";
const PATH = "/api/v1/namespaces/default/pods?limit=500";
const ACCEPT =
  "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

export async function measureKubeList(o: {
  requests: number;
  trials: number;
  burst: number;
  log: (s: string) => void;
}): Promise<KubeListRun> {
  // GitLab lets group/app's jobs use agent 42 from the ci_access kas posts.
  const setup = await startKubeProxySetup(
    { ci_access: { projects: [{ id: "group/app", access_as: { ci_job: {} } }] } },
    undefined,
    { seed: (gitlab) => gitlab.addProject({ projectId: 100, path: "group/app" }) },
  );
  const { kube, gitlab, kas } = setup;
  for (let i = 0; i < 20; i++) {
    kube.store.create("pods", "default", {
      metadata: { name: `web-${i}`, labels: { app: "web" } },
      spec: { containers: [{ name: "main", image: "nginx" }] },
      status: { phase: "Running" },
    });
  }
  gitlab.addJob(JOB_TOKEN, {
    jobId: 1,
    pipelineId: 2,
    projectId: 100,
    user: { id: 5, username: "bench" },
  });
  const pki = await testPki();
  const bare = await startBareProxies({ upstream: kube, tls: pki });
  type Path = "direct" | "kas" | "bare";
  const target: Record<Path, { origin: string; dispatcher: Dispatcher; token: string }> = {
    direct: { origin: kube.url, dispatcher: new Agent({ connect: { ca: kube.caCert } }), token: kube.token },
    kas: {
      origin: kas.addresses.kubernetesApi,
      dispatcher: new Agent({ connect: { ca: setup.caCert } }),
      token: `ci:42:${JOB_TOKEN}`,
    },
    bare: { origin: bare.url, dispatcher: new Agent({ connect: { ca: pki.caCert } }), token: "unused" },
  };
  const list = async (p: Path): Promise<number> => {
    const { origin, dispatcher, token } = target[p];
    const t0 = performance.now();
    const res = await dispatcher.request({
      origin,
      path: PATH,
      method: "GET",
      headers: { authorization: `Bearer ${token}`, accept: ACCEPT, "user-agent": "kubectl/bench" },
    });
    const body = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`${p}: GET ${PATH} answered ${res.statusCode}: ${body}`);
    return performance.now() - t0;
  };
  const out: KubeListRun = {
    direct: [],
    kas: [],
    bare: [],
    gitlabAuthCalls: 0,
    elapsedMs: 0,
    ttlMs: kas.config.agent.kubernetesApi.allowedAgentCacheTtlMs,
  };
  const callsBefore = gitlab.proxyAuthRequests;
  const t0 = performance.now();
  try {
    // Cold: the job token unknown to kas, `burst` requests at once.
    await Promise.all(Array.from({ length: o.burst }, () => list("kas")));
    o.log(
      `kube list: ${o.burst} concurrent cold requests through kas -> ${gitlab.proxyAuthRequests - callsBefore} GitLab call(s)`,
    );
    const paths: Path[] = ["direct", "kas", "bare"];
    for (let i = 0; i < 100; i++) for (const p of paths) await list(p);
    for (let t = 0; t < o.trials; t++) {
      const order = t % 2 === 0 ? paths : [...paths].reverse();
      for (const p of order) for (let i = 0; i < o.requests; i++) out[p].push(await list(p));
    }
    out.gitlabAuthCalls = gitlab.proxyAuthRequests - callsBefore;
    out.elapsedMs = performance.now() - t0;
  } finally {
    for (const { dispatcher } of Object.values(target)) await dispatcher.close();
    await bare.close();
    await setup.close();
  }
  return out;
}
