// The connection pool to the API server for the TLS settings in force: one agent while they hold,
// a new one when they change (a rotated CA, client certificate or key), optionally tunnelled
// through the kubeconfig's `proxy-url`.
import { createHash } from "node:crypto";
import * as http from "node:http";
import * as https from "node:https";
import type { ConnectionOptions } from "node:tls";
import { HttpsProxyAgent } from "https-proxy-agent";

/** What the API server connection is checked and authenticated with (client-node's `applyHTTPSOptions`). */
export type TlsSettings = Pick<
  ConnectionOptions,
  "ca" | "cert" | "key" | "rejectUnauthorized" | "servername"
>;

export class UpstreamAgents {
  readonly #secure: boolean;
  readonly #proxy: URL | undefined;
  #current: { tls: TlsSettings; fingerprint: string; agent: http.Agent } | undefined;
  /** Replaced agents whose connections are still finishing; destroyed on `close`. */
  readonly #retired = new Set<http.Agent>();

  /** `proxy`: an HTTP(S) proxy reached with CONNECT. */
  constructor(server: URL, proxy: URL | undefined) {
    this.#secure = server.protocol === "https:";
    this.#proxy = proxy;
  }

  /**
   * The agent for `tls`: the current one while the settings are unchanged, else a new one.
   * Called per request: the same settings object (until the next refresh) costs no comparison.
   */
  for(tls: TlsSettings): http.Agent {
    const current = this.#current;
    if (current?.tls === tls) return current.agent;
    const fingerprint = fingerprintOf(tls);
    if (current?.fingerprint === fingerprint) {
      current.tls = tls;
      return current.agent;
    }
    if (current) this.#retire(current.agent);
    const agent = this.#create(tls);
    this.#current = { tls, fingerprint, agent };
    return agent;
  }

  /** Closes every connection, in flight or idle, of the current agent and the retired ones. */
  destroy(): void {
    this.#current?.agent.destroy();
    for (const agent of this.#retired) agent.destroy();
    this.#retired.clear();
  }

  #create(tls: TlsSettings): http.Agent {
    const settings = this.#secure ? definedOnly(tls) : {};
    if (this.#proxy) return new TunnelledAgent(this.#proxy, settings);
    return this.#secure
      ? new https.Agent({ keepAlive: true, ...settings })
      : new http.Agent({ keepAlive: true });
  }

  /** In-flight requests (a watch, an exec session) run to their end; their connections then close. */
  #retire(agent: http.Agent): void {
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
