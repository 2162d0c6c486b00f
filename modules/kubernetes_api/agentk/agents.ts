// The connection pools to the API server for the TLS settings in force: one pair while they hold,
// a new one when they change (a rotated CA, client certificate or key), optionally tunnelled
// through the kubeconfig's `proxy-url`. Plain requests go through an undici pool (a third less
// work per request than node:http's client), upgrades through a node:http agent.
import { createHash } from "node:crypto";
import * as http from "node:http";
import * as https from "node:https";
import type { ConnectionOptions } from "node:tls";
import { HttpsProxyAgent } from "https-proxy-agent";
import { type Dispatcher, Pool } from "undici";

/** What the API server connection is checked and authenticated with (client-node's `applyHTTPSOptions`). */
export type TlsSettings = Pick<
  ConnectionOptions,
  "ca" | "cert" | "key" | "rejectUnauthorized" | "servername"
>;

/** The two clients for one set of TLS settings; `dispatcher` absent behind a `proxy-url`. */
export interface Pools {
  agent: http.Agent;
  dispatcher?: Dispatcher;
}

/**
 * How long an idle pooled connection is kept: under the API server's own idle timeout (90 s), so
 * the server is not the one to close it under a request; node:http's agent keeps them until then.
 */
const IDLE_MS = 60_000;

export class UpstreamAgents {
  readonly #server: URL;
  readonly #secure: boolean;
  readonly #proxy: URL | undefined;
  #current: { tls: TlsSettings; fingerprint: string; pools: Pools } | undefined;
  /** Replaced agents whose connections are still finishing; destroyed on `close`. */
  readonly #retired = new Set<http.Agent>();
  /** Replaced pools, closing once their requests are done; destroyed on `close`. */
  readonly #retiredPools = new Set<Dispatcher>();

  /** `proxy`: an HTTP(S) proxy reached with CONNECT. */
  constructor(server: URL, proxy: URL | undefined) {
    this.#server = server;
    this.#secure = server.protocol === "https:";
    this.#proxy = proxy;
  }

  /**
   * The pools for `tls`: the current ones while the settings are unchanged, else new ones.
   * Called per request: the same settings object (until the next refresh) costs no comparison.
   */
  for(tls: TlsSettings): Pools {
    const current = this.#current;
    if (current?.tls === tls) return current.pools;
    const fingerprint = fingerprintOf(tls);
    if (current?.fingerprint === fingerprint) {
      current.tls = tls;
      return current.pools;
    }
    if (current) this.#retire(current.pools);
    const pools = this.#create(tls);
    this.#current = { tls, fingerprint, pools };
    return pools;
  }

  /** Closes every connection, in flight or idle, of the current pools and the retired ones. */
  destroy(): void {
    const current = this.#current?.pools;
    current?.agent.destroy();
    current?.dispatcher?.destroy().catch(() => {});
    for (const agent of this.#retired) agent.destroy();
    this.#retired.clear();
    for (const pool of this.#retiredPools) pool.destroy().catch(() => {});
    this.#retiredPools.clear();
  }

  #create(tls: TlsSettings): Pools {
    const settings = this.#secure ? definedOnly(tls) : {};
    if (this.#proxy) return { agent: new TunnelledAgent(this.#proxy, settings) };
    const agent = this.#secure
      ? new https.Agent({ keepAlive: true, ...settings })
      : new http.Agent({ keepAlive: true });
    const dispatcher = new Pool(this.#server.origin, {
      connect: settings,
      keepAliveTimeout: IDLE_MS,
      keepAliveMaxTimeout: IDLE_MS,
      // As node:http's client: a watch or `logs -f` may be silent for long, and the client
      // (kubectl, kas's side) decides when to give up waiting.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    return { agent, dispatcher };
  }

  /** In-flight requests (a watch, an exec session) run to their end; their connections then close. */
  #retire({ agent, dispatcher }: Pools): void {
    if (dispatcher) {
      this.#retiredPools.add(dispatcher);
      // Closes idle connections now, the others once their requests are done.
      dispatcher.close().then(
        () => this.#retiredPools.delete(dispatcher),
        () => {},
      );
    }
    // node:http's Agent destroys a freed socket instead of pooling it once keepAlive is off.
    (agent as http.Agent & { keepAlive: boolean }).keepAlive = false;
    for (const sockets of Object.values(agent.freeSockets)) for (const s of sockets ?? []) s.destroy();
    this.#retired.add(agent);
    for (const old of this.#retired) {
      if (Object.keys(old.sockets).length === 0 && Object.keys(old.freeSockets).length === 0) {
        this.#retired.delete(old);
      }
    }
  }
}

/**
 * CONNECT through the proxy, then TLS to the API server with `tls`. https-proxy-agent takes the
 * target's TLS options from each request's, not from its own (those are for the proxy), so
 * they are added here.
 */
class TunnelledAgent extends HttpsProxyAgent<string> {
  readonly #tls: ConnectionOptions;

  constructor(proxy: URL, tls: ConnectionOptions) {
    super(proxy.href, { keepAlive: true });
    this.#tls = tls;
  }

  override connect(req: http.ClientRequest, opts: Parameters<HttpsProxyAgent<string>["connect"]>[1]) {
    return super.connect(req, { ...opts, ...this.#tls });
  }
}

function fingerprintOf(tls: TlsSettings): string {
  const hash = createHash("sha256");
  for (const value of [tls.ca, tls.cert, tls.key, tls.rejectUnauthorized, tls.servername]) {
    hash.update(JSON.stringify(value === undefined ? null : String(value)));
  }
  return hash.digest("hex");
}

function definedOnly(tls: TlsSettings): ConnectionOptions {
  return Object.fromEntries(Object.entries(tls).filter(([, v]) => v !== undefined));
}
