// Where agentk's Kubernetes API proxy sends requests, with agentk's own credentials: the
// configuration @kubernetes/client-node builds from a kubeconfig or the pod's service account.
import { readFile } from "node:fs/promises";
import type * as http from "node:http";
import type * as https from "node:https";
import type { KubeConfig } from "@kubernetes/client-node";
import type { Upstream } from "../../../tool/http/proxy/index.ts";
import { HttpError } from "../../../tool/http/serve/index.ts";
import {
  type ClusterIdentity,
  decodeIdentity,
  IdentityError,
  impersonationHeaders,
  isImpersonationHeader,
} from "../identity.ts";
import { type TlsSettings, UpstreamAgents } from "./agents.ts";
import type { KubeConfigSource } from "./kube-config-source.ts";
import { loadKubeConfig } from "./kubeconfig.ts";
import { Refreshing } from "./refreshing.ts";

/** How often credentials and TLS files are re-read: client-go re-reads a token file every minute. */
export const DEFAULT_REFRESH_MS = 60_000;

export interface KubernetesUpstreamOptions {
  /** Credentials (a rotated service-account token) and TLS files (a rotated CA) are re-read this often. Default 1 min. */
  refreshMs?: number;
  log?: { warn(obj: object, msg: string): void };
}

/** What requests are sent with until the next refresh. */
interface Settings {
  tls: TlsSettings;
  /** Lowercase names: Authorization, and Impersonate-User for a kubeconfig user with `as`. */
  headers: http.OutgoingHttpHeaders;
}

/** The API server and the credentials to use on it; undefined when agentk has no Kubernetes configuration. */
export async function kubernetesUpstream(
  source: KubeConfigSource,
  options: KubernetesUpstreamOptions = {},
): Promise<Upstream | undefined> {
  if (source.kind === "none") return undefined;
  const { kc, tokenFile } = await loadKubeConfig(source);
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("the Kubernetes configuration has no current cluster");
  const url = new URL(cluster.server);
  const agents = new UpstreamAgents(url, connectProxy(cluster.proxyUrl));
  const settings = new Refreshing(
    () => readSettings(kc, tokenFile),
    options.refreshMs ?? DEFAULT_REFRESH_MS,
    (err) =>
      options.log?.warn(
        { err, server: url.origin },
        "cannot refresh the Kubernetes credentials; still using the previous ones",
      ),
  );
  // Read once now: a configuration that cannot work fails agentk's start, not its first request.
  await settings.get();

  return {
    url,
    async prepare(incoming, identity) {
      const as = identityOf(identity);
      const { tls, headers } = await settings.get();
      return { ...agents.for(tls), headers: clusterHeaders(incoming, headers, as) };
    },
    destroy: () => agents.destroy(),
  };
}

/** kas's decision as agentk applies it: whom the cluster sees, and the headers saying so when kas impersonates. */
interface Decision {
  identity: ClusterIdentity;
  /** Built once per decision, not per request (frozen: every request of the decision shares them). */
  impersonation?: Readonly<Record<string, string | readonly string[]>>;
}

/** kas's decision on whom the cluster sees; without a readable one the request is refused. */
let lastDecision: { value: string; decision: Decision } | undefined;

function identityOf(value: string | undefined): Decision {
  // A caller's requests carry the same value (kas encodes each decision once): decoded once too,
  // not on every request of a watch-heavy client.
  if (value !== undefined && value === lastDecision?.value) return lastDecision.decision;
  try {
    const identity = decodeIdentity(value);
    const decision: Decision =
      identity.as === "impersonate"
        ? { identity, impersonation: freeze(impersonationHeaders(identity.who)) }
        : { identity };
    lastDecision = { value: value!, decision };
    return decision;
  } catch (err) {
    if (err instanceof IdentityError) throw new HttpError(403, `${err.message}: refused`);
    throw err;
  }
}

function freeze(
  headers: Record<string, string | string[]>,
): Readonly<Record<string, string | readonly string[]>> {
  for (const value of Object.values(headers)) if (Array.isArray(value)) Object.freeze(value);
  return Object.freeze(headers);
}

/**
 * What the API server gets: the request's headers without any credential or identity of its own
 * (what came through the tunnel is kas's business), agentk's credentials, and as whom kas decided.
 * An impersonation by kas replaces one of agentk's kubeconfig (`as`) whole: never a mix of both.
 */
function clusterHeaders(
  incoming: http.OutgoingHttpHeaders,
  own: http.OutgoingHttpHeaders,
  { identity, impersonation }: Decision,
): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = {};
  for (const name in incoming)
    if (!FROM_KAS_NEVER.has(name) && !isImpersonationHeader(name)) out[name] = incoming[name];
  for (const name in own) if (identity.as === "agent" || !isImpersonationHeader(name)) out[name] = own[name];
  if (impersonation !== undefined) Object.assign(out, impersonation);
  return out;
}

/** Credentials a request through the tunnel may carry that never reach the cluster. */
const FROM_KAS_NEVER: ReadonlySet<string> = new Set(["authorization", "cookie"]);

/**
 * Everything client-node would apply to a request (CA, client certificate and key, each from
 * its file or inline data; token, basic auth, exec plugins and auth providers, which cache
 * their own credentials), then the token file's current content.
 */
async function readSettings(kc: KubeConfig, tokenFile: string | undefined): Promise<Settings> {
  const opts: https.RequestOptions = {};
  // Also makes (and here drops) an agent: the pool lives in UpstreamAgents, across refreshes.
  await kc.applyToHTTPSOptions(opts);
  const headers = lowercase({ ...(opts.headers as http.OutgoingHttpHeaders | undefined) });
  if (opts.auth) headers.authorization = `Basic ${Buffer.from(opts.auth).toString("base64")}`;
  if (tokenFile !== undefined) {
    const token = (await readFile(tokenFile, "utf8")).trim();
    if (token === "") throw new Error(`the token file ${tokenFile} is empty`);
    headers.authorization = `Bearer ${token}`;
  }
  const { ca, cert, key, rejectUnauthorized, servername } = opts;
  return { tls: { ca, cert, key, rejectUnauthorized, servername }, headers };
}

/** The cluster's `proxy-url`: an HTTP(S) proxy that speaks CONNECT. Never echoed: it may hold credentials. */
function connectProxy(raw: string | undefined): URL | undefined {
  if (!raw) return undefined;
  const url = URL.canParse(raw) ? new URL(raw) : undefined;
  if (url?.protocol === "http:" || url?.protocol === "https:") return url;
  throw new Error(
    "the cluster's proxy-url must be an http:// or https:// proxy (HTTP CONNECT); other kinds (socks) are not supported",
  );
}

function lowercase(headers: http.OutgoingHttpHeaders): http.OutgoingHttpHeaders {
  return Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
}
