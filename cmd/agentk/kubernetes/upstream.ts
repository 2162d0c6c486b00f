// Where agentk's Kubernetes API proxy sends requests, with agentk's own credentials: the
// configuration @kubernetes/client-node builds from a kubeconfig or the pod's service account.
import * as http from "node:http";
import * as https from "node:https";
import type { KubeConfig } from "@kubernetes/client-node";
import type { KubeConfigSource } from "../config/index.ts";
import type { Upstream } from "../proxy/forward.ts";

/** The API server and the credentials to use on it; undefined when agentk has no Kubernetes configuration. */
export async function kubernetesUpstream(source: KubeConfigSource): Promise<Upstream | undefined> {
  if (source.kind === "none") return undefined;
  const kc = await loadKubeConfig(source);
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("the Kubernetes configuration has no current cluster");
  const url = new URL(cluster.server);

  // TLS material is fixed for the process; credentials are re-read per request below, so a
  // rotated service-account token (or an exec plugin's refreshed one) is picked up.
  const tls: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(tls);
  const agent =
    url.protocol === "https:"
      ? new https.Agent({
          keepAlive: true,
          ...(tls.ca !== undefined && { ca: tls.ca }),
          ...(tls.cert !== undefined && { cert: tls.cert }),
          ...(tls.key !== undefined && { key: tls.key }),
          ...(tls.pfx !== undefined && { pfx: tls.pfx }),
          ...(tls.passphrase !== undefined && { passphrase: tls.passphrase }),
          ...(cluster.skipTLSVerify && { rejectUnauthorized: false }),
          ...(cluster.tlsServerName && { servername: cluster.tlsServerName }),
        })
      : new http.Agent({ keepAlive: true });

  return {
    url,
    agent,
    async headers(incoming) {
      const opts: https.RequestOptions = {};
      await kc.applyToHTTPSOptions(opts);
      // Whatever credentials came through the tunnel are kas's business; the API server sees
      // agentk's own, plus the Impersonate-* headers kas set to say on whose behalf.
      const { authorization: _dropped, ...rest } = incoming;
      const own = { ...(opts.headers as http.OutgoingHttpHeaders | undefined) };
      if (opts.auth) own.authorization = `Basic ${Buffer.from(opts.auth).toString("base64")}`;
      return { ...rest, ...lowercase(own) };
    },
  };
}

async function loadKubeConfig(source: Exclude<KubeConfigSource, { kind: "none" }>): Promise<KubeConfig> {
  // Loaded only when needed: the client is large, and agentk often runs without a cluster (dev, demo).
  const { KubeConfig } = await import("@kubernetes/client-node");
  const kc = new KubeConfig();
  if (source.kind === "in-cluster") {
    kc.loadFromOptions({
      clusters: [{ name: "in-cluster", server: source.server, caFile: source.caFile, skipTLSVerify: false }],
      users: [
        {
          name: "service-account",
          authProvider: { name: "tokenFile", config: { tokenFile: source.tokenFile } },
        },
      ],
      contexts: [{ name: "in-cluster", cluster: "in-cluster", user: "service-account" }],
      currentContext: "in-cluster",
    });
    return kc;
  }
  // KUBECONFIG with several files: merged in order, the first file's current context wins (kubectl's rule).
  const [first, ...rest] = source.paths;
  kc.loadFromFile(first!);
  for (const path of rest) {
    const more = new KubeConfig();
    more.loadFromFile(path);
    kc.mergeConfig(more, true);
  }
  return kc;
}

function lowercase(headers: http.OutgoingHttpHeaders): http.OutgoingHttpHeaders {
  return Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
}
