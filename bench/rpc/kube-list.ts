// `kubectl get pods`' list request through kas's Kubernetes API proxy with a CI job's token against
// the same request straight to the Kubernetes test server (../lib/kube-list.ts). Counts GitLab's
// authorization calls: a cold burst of concurrent requests shares one lookup, and the warm cache
// asks no more. Also the floor under the kas path: the same request through two bare Node.js
// proxies in a chain (bare-proxies.ts).
import { Agent } from "undici";
import { testPki } from "../../test/support/tls-certs.ts";
import { alternate, type KubeListTarget, startKubeList } from "../lib/kube-list.ts";
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

export async function measureKubeList(o: {
  requests: number;
  trials: number;
  burst: number;
  log: (s: string) => void;
}): Promise<KubeListRun> {
  const kube = await startKubeList();
  const { gitlab, kas } = kube.setup;
  const pki = await testPki();
  const bare = await startBareProxies({ upstream: kube.setup.kube, tls: pki });
  type Path = "direct" | "kas" | "bare";
  const target: Record<Path, KubeListTarget> = {
    direct: kube.direct,
    kas: kube.kas,
    bare: { origin: bare.url, dispatcher: new Agent({ connect: { ca: pki.caCert } }), token: "unused" },
  };
  const list = (p: Path) => kube.time(target[p], p);
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
    const times = await alternate(paths, o, list);
    return {
      ...times,
      gitlabAuthCalls: gitlab.proxyAuthRequests - callsBefore,
      elapsedMs: performance.now() - t0,
      ttlMs: kas.config.agent.kubernetesApi.allowedAgentCacheTtlMs,
    };
  } finally {
    await target.bare.dispatcher.close();
    await bare.close();
    await kube.close();
  }
}
