// `kubectl get pods`'s list request over a long link: through kas's Kubernetes API proxy, whose
// tunnel to agentk crosses the link (kas near the client, agentk beside the Kubernetes API), against
// the same request sent straight to the Kubernetes test server across the same link. Both clients
// keep their connection (kas's side keeps its tunnel stream), as kubectl and kas do between requests.
import { Agent, type Dispatcher } from "undici";
import { startKubeProxySetup } from "../../test/support/kube-proxy-setup.ts";
import type { Links } from "./links.ts";

export interface WanKubeRun {
  /** Latency of each request, ms. */
  direct: number[];
  kas: number[];
}

const JOB_TOKEN = "bench-job-token";
const PATH = "/api/v1/namespaces/default/pods?limit=500";
const ACCEPT =
  "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

export async function measureWanKubeList(o: {
  links: Links;
  link: string;
  requests: number;
  trials: number;
  log: (s: string) => void;
}): Promise<WanKubeRun> {
  const throughLink = async (url: string) => {
    const u = new URL(url);
    u.port = String(await o.links.forward(o.link, Number(u.port)));
    return u.origin;
  };
  const setup = await startKubeProxySetup(
    { ci_access: { projects: [{ id: "group/app", access_as: { ci_job: {} } }] } },
    () => {},
    {
      // GitLab lets group/app's jobs use agent 42 from the ci_access kas posts.
      seed: (gitlab) => gitlab.addProject({ projectId: 100, path: "group/app" }),
      agentKasUrl: async (url) => (await throughLink(url)) + new URL(url).pathname,
    },
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
  type Path = "direct" | "kas";
  const target: Record<Path, { origin: string; dispatcher: Dispatcher; token: string }> = {
    direct: {
      origin: await throughLink(kube.url),
      dispatcher: new Agent({ connect: { ca: kube.caCert } }),
      token: kube.token,
    },
    kas: {
      origin: kas.addresses.kubernetesApi,
      dispatcher: new Agent({ connect: { ca: setup.caCert } }),
      token: `ci:42:${JOB_TOKEN}`,
    },
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
  const out: WanKubeRun = { direct: [], kas: [] };
  try {
    const paths: Path[] = ["direct", "kas"];
    // Warm: connections, TLS sessions, GitLab's authorization in kas's cache, the kept tunnel stream.
    for (let i = 0; i < 3; i++) for (const p of paths) await list(p);
    for (let t = 0; t < o.trials; t++) {
      const order = t % 2 === 0 ? paths : [...paths].reverse();
      for (const p of order) for (let i = 0; i < o.requests; i++) out[p].push(await list(p));
      o.log(`kube list trial ${t + 1}/${o.trials}`);
    }
  } finally {
    for (const { dispatcher } of Object.values(target)) await dispatcher.close();
    await setup.close();
  }
  return out;
}
