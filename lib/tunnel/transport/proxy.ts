import { EventEmitter } from "node:events";
import type { ClientRequest } from "node:http";
import type { Socket } from "node:net";
import type { ConnectionOptions } from "node:tls";
import { HttpsProxyAgent } from "https-proxy-agent";
import { getProxyForUrl } from "proxy-from-env";
import { HandshakeError } from "./errors.ts";

/**
 * The HTTP CONNECT proxy to use for `target`, if any: the explicit option, or the environment
 * (`HTTPS_PROXY` for wss, `HTTP_PROXY` for ws, `ALL_PROXY`, `NO_PROXY`, lowercase or not).
 */
export function resolveProxy(target: URL, option: string | URL | false | undefined): URL | undefined {
  if (option === false) return undefined;
  let raw: string | URL;
  if (option !== undefined) {
    raw = option;
  } else {
    // proxy-from-env looks up `<scheme>_proxy`; WebSocket URLs are HTTP(S) for proxying purposes.
    const asHttp = new URL(target);
    asHttp.protocol = target.protocol === "wss:" ? "https:" : "http:";
    raw = getProxyForUrl(asHttp.href);
    if (!raw) return undefined;
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new TypeError(`invalid proxy URL: ${String(raw)}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new TypeError(
      `unsupported proxy scheme ${url.protocol} in ${redact(url)}: only http:// and https:// (HTTP CONNECT) proxies are supported`,
    );
  }
  return url;
}

/** An agent that tunnels through `proxy` with CONNECT; `signal` aborts the proxy connection. */
export function createProxyAgent(proxy: URL, signal: AbortSignal): HttpsProxyAgent<string> {
  return new HttpsProxyAgent(proxy.href, { signal } as ConstructorParameters<typeof HttpsProxyAgent>[1]);
}

export interface ProxiedTarget {
  host: string;
  port: number;
  /** TLS options for the target; when set the tunnelled socket is upgraded to TLS. */
  tls?: ConnectionOptions;
}

/**
 * Opens a tunnel through `proxy` to `target` (TLS-wrapped if asked) for callers that need a raw
 * socket rather than an `http.Agent`, i.e. the HTTP/2 dialer.
 */
export async function connectThroughProxy(
  proxy: URL,
  target: ProxiedTarget,
  signal: AbortSignal,
  url: string,
): Promise<Socket> {
  const agent = createProxyAgent(proxy, signal);
  // https-proxy-agent reports the CONNECT answer on the request object; nothing else uses it here.
  const req = new EventEmitter();
  let refused: { statusCode: number; headers: Record<string, string | string[]> } | undefined;
  req.on("proxyConnect", (connect: { statusCode: number; headers: Record<string, string | string[]> }) => {
    if (connect.statusCode !== 200) refused = connect;
  });
  const socket = await agent.connect(req as unknown as ClientRequest, {
    host: target.host,
    port: target.port,
    secureEndpoint: target.tls !== undefined,
    ...target.tls,
  });
  if (refused) {
    socket.destroy();
    throw new HandshakeError({
      status: refused.statusCode,
      body: "",
      headers: refused.headers,
      via: "proxy",
      url,
    });
  }
  return socket as Socket;
}

/** The proxy URL without credentials, for messages. */
export function redact(url: URL): string {
  if (!url.username && !url.password) return url.href;
  const copy = new URL(url);
  copy.username = "***";
  copy.password = "";
  return copy.href;
}
