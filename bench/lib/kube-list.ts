// `kubectl get pods` as its list request (GET /api/v1/namespaces/default/pods, asking for a Table)
// for bench:rpc and bench:wan: kas's Kubernetes API proxy with a CI job's token (GitLab's
// allowed_agents, the agent's ci_access, impersonation as gitlab:ci_job:<id>) and agentk, the same
// request straight to the Kubernetes test server (20 pods), and the timing of one request on a path.
import { Agent, type Dispatcher } from "undici";
import {
  type KubeProxySetup,
  type KubeProxySetupOptions,
  startKubeProxySetup,
} from "../../test/support/kube-proxy-setup.ts";

/** Where one path's requests go, and with which client and token. */
export interface KubeListTarget {
  origin: string;
  dispatcher: Dispatcher;
  token: string;
}

export interface KubeList {
  setup: KubeProxySetup;
  /** Straight to the Kubernetes test server (through `directOrigin` when given). */
  direct: KubeListTarget;
  /** Through kas's proxy with `ci:42:<job token>`. */
  kas: KubeListTarget;
  /** One list request on `target`, its latency in ms; throws unless it answered 200. */
  time(target: KubeListTarget, name: string): Promise<number>;
  /** Closes the two targets' clients and the setup. */
  close(): Promise<void>;
}

const JOB_TOKEN = "bench-job-token";
const PATH = "/api/v1/namespaces/default/pods?limit=500";
const ACCEPT =
  "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

export async function startKubeList(
  o: {
    /** The origin the direct path uses for the Kubernetes test server's (bench:wan puts its link there). */
    directOrigin?: (url: string) => Promise<string>;
    agentKasUrl?: KubeProxySetupOptions["agentKasUrl"];
  } = {},
): Promise<KubeList> {
  const setup = await startKubeProxySetup(
    { ci_access: { projects: [{ id: "group/app", access_as: { ci_job: {} } }] } },
    undefined,
    {
      // GitLab lets group/app's jobs use agent 42 from the ci_access kas posts.
      seed: (gitlab) => gitlab.addProject({ projectId: 100, path: "group/app" }),
      ...(o.agentKasUrl && { agentKasUrl: o.agentKasUrl }),
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
  const direct: KubeListTarget = {
    origin: o.directOrigin ? await o.directOrigin(kube.url) : kube.url,
    dispatcher: new Agent({ connect: { ca: kube.caCert } }),
    token: kube.token,
  };
  const viaKas: KubeListTarget = {
    origin: kas.addresses.kubernetesApi,
    dispatcher: new Agent({ connect: { ca: setup.caCert } }),
    token: `ci:42:${JOB_TOKEN}`,
  };
  return {
    setup,
    direct,
    kas: viaKas,
    async time({ origin, dispatcher, token }, name) {
      const t0 = performance.now();
      const res = await dispatcher.request({
        origin,
        path: PATH,
        method: "GET",
        headers: { authorization: `Bearer ${token}`, accept: ACCEPT, "user-agent": "kubectl/bench" },
      });
      const body = await res.body.text();
      if (res.statusCode !== 200) throw new Error(`${name}: GET ${PATH} answered ${res.statusCode}: ${body}`);
      return performance.now() - t0;
    },
    async close() {
      await direct.dispatcher.close();
      await viaKas.dispatcher.close();
      await setup.close();
    },
  };
}

/**
 * `trials` rounds of `requests` sequential requests on each path, the paths back to back in
 * alternating order (a noisy neighbour hurts them alike); latencies per path, ms.
 */
export async function alternate<P extends string>(
  paths: P[],
  o: { trials: number; requests: number; log?: (s: string) => void },
  time: (path: P) => Promise<number>,
): Promise<Record<P, number[]>> {
  const out = Object.fromEntries(paths.map((p) => [p, [] as number[]])) as Record<P, number[]>;
  for (let t = 0; t < o.trials; t++) {
    const order = t % 2 === 0 ? paths : [...paths].reverse();
    for (const p of order) for (let i = 0; i < o.requests; i++) out[p].push(await time(p));
    o.log?.(`kube list trial ${t + 1}/${o.trials}`);
  }
  return out;
}
