import { dialH1 } from "./client-h1.ts";
import { dialH2 } from "./client-h2.ts";
import type { TransportConnection } from "./connection.ts";
import { DEFAULT_HANDSHAKE_TIMEOUT_MS, DEFAULT_MAX_PAYLOAD, TUNNEL_SUBPROTOCOL } from "./constants.ts";
import type { DialConfig } from "./dial-config.ts";
import { TransportError, toDialError } from "./errors.ts";
import { type DialOptions, positive } from "./options.ts";
import { resolveProxy } from "./proxy.ts";
import { resolveClientTls } from "./tls-options.ts";

/**
 * Dials a tunnel WebSocket. Resolves once the handshake is done; rejects with a
 * {@link TransportError} (a {@link HandshakeError} when the server or proxy answered with a status).
 */
export async function dial(url: string | URL, options: DialOptions = {}): Promise<TransportConnection> {
  const target = parseTarget(url);
  const href = target.href;
  const timeoutMs = positive("handshakeTimeoutMs", options.handshakeTimeoutMs, DEFAULT_HANDSHAKE_TIMEOUT_MS);
  const cfg: DialConfig = {
    subprotocol: checkSubprotocol(options.subprotocol ?? TUNNEL_SUBPROTOCOL),
    headers: options.headers ?? {},
    maxPayload: positive("maxPayload", options.maxPayload, DEFAULT_MAX_PAYLOAD),
    tls: target.protocol === "wss:" ? await resolveClientTls(options) : {},
    proxy: resolveProxy(target, options.proxy),
  };
  const user = options.signal;
  if (user?.aborted) throw new TransportError("ABORTED", `dial ${href} aborted`, { cause: user.reason });

  // One signal for the whole attempt: the caller's abort or the handshake deadline, whichever is first.
  const controller = new AbortController();
  const onAbort = () =>
    controller.abort(new TransportError("ABORTED", `dial ${href} aborted`, { cause: user?.reason }));
  user?.addEventListener("abort", onAbort, { once: true });
  const timer = setTimeout(() => {
    const message = `WebSocket handshake with ${href} did not complete within ${timeoutMs} ms`;
    controller.abort(new TransportError("HANDSHAKE_TIMEOUT", message));
  }, timeoutMs);

  try {
    const signal = controller.signal;
    return await (options.http2 ? dialH2(target, cfg, signal) : dialH1(target, cfg, signal));
  } catch (err) {
    if (controller.signal.aborted) throw controller.signal.reason;
    if (err instanceof TypeError) throw err; // bad options, e.g. a header value Node refuses
    throw toDialError(err, href);
  } finally {
    clearTimeout(timer);
    user?.removeEventListener("abort", onAbort);
  }
}

/** RFC 6455: a subprotocol is an HTTP token. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

function checkSubprotocol(name: string): string {
  if (!TOKEN.test(name)) throw new TypeError(`invalid WebSocket subprotocol ${JSON.stringify(name)}`);
  return name;
}

function parseTarget(url: string | URL): URL {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    throw new TypeError(`invalid tunnel URL: ${String(url)}`);
  }
  if (target.protocol === "http:") target.protocol = "ws:";
  if (target.protocol === "https:") target.protocol = "wss:";
  if (target.protocol !== "ws:" && target.protocol !== "wss:") {
    throw new TypeError(`tunnel URL must be ws://, wss://, http:// or https://, got ${target.protocol}//`);
  }
  if (target.hash) throw new TypeError(`tunnel URL must not contain a fragment: ${target.href}`);
  return target;
}
