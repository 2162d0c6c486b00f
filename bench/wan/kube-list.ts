// `kubectl get pods`'s list request over a long link: through kas's Kubernetes API proxy, whose
// tunnel to agentk crosses the link (kas near the client, agentk beside the Kubernetes API), against
// the same request sent straight to the Kubernetes test server across the same link
// (../lib/kube-list.ts). Both clients keep their connection (kas's side keeps its tunnel stream), as
// kubectl and kas do between requests.
import { alternate, startKubeList } from "../lib/kube-list.ts";
import type { Links } from "./links.ts";

export interface WanKubeRun {
  /** Latency of each request, ms. */
  direct: number[];
  kas: number[];
}

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
  const kube = await startKubeList({
    directOrigin: throughLink,
    agentKasUrl: async (url) => (await throughLink(url)) + new URL(url).pathname,
  });
  const list = (p: "direct" | "kas") => kube.time(kube[p], p);
  try {
    // Warm: connections, TLS sessions, GitLab's authorization in kas's cache, the kept tunnel stream.
    for (let i = 0; i < 3; i++) for (const p of ["direct", "kas"] as const) await list(p);
    return await alternate(["direct", "kas"], o, list);
  } finally {
    await kube.close();
  }
}
