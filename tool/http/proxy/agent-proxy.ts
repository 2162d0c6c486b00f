import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { Dispatcher } from "undici";
import type { Router } from "../../../lib/router/index.ts";
import { splice } from "../../../lib/router/index.ts";
import { Kind, TunnelDispatcher } from "../../../lib/tunnel/index.ts";
import { ClientGone } from "./client-gone.ts";
import { endToEnd, endToEndLines, IDENTITY_HEADER } from "./hop-by-hop.ts";
import { hasBody, relayBody } from "./relay-body.ts";

/** Which agent, and which of its services (`kubernetes`, or an allow-listed name such as `prometheus`). */
export interface AgentTarget {
  agentId: string;
  service: string;
}

export interface ForwardOptions {
  /** Path and query string as the agent's service should see them. */
  path: string;
  /** Request headers (lowercase) not to pass on, beyond the hop-by-hop ones. */
  drop?: (lowerName: string) => boolean;
  /**
   * kas's decision of who the caller is, as the agent's side reads it (sent as `Kas-Identity`;
   * never taken from the client). Absent: none is sent.
   */
  identity?: string;
}

export interface AgentHttpProxyOptions {
  /** How long a request waits for a stream to the agent (tunnel on any replica + its verdict). */
  dialTimeoutMs: number;
  /** Streams open at once through this proxy (each request in flight or kept alive holds one). Default 10 000. */
  maxStreams?: number;
}

/** Service names travel in a host name (the dispatcher's origin): DNS labels only. */
export const SERVICE_NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const ORIGIN = /^http:\/\/([a-z0-9-]+)\.(\d+)\.agent\.kas$/;

/**
 * HTTP to an agent's services over tunnel streams (`router.dial` with kind HTTP), wherever the
 * agent's tunnel is. Plain requests go through one TunnelDispatcher (streams kept alive and
 * reused per agent and service); Upgrade requests (exec, attach, port-forward, WebSockets)
 * get a stream of their own, spliced to the client's connection once the request is written,
 * so the agent's answer, 101 or an error, reaches the client unchanged.
 */
export class AgentHttpProxy {
  readonly #router: Router;
  readonly #dialTimeoutMs: number;
  readonly #dispatcher: TunnelDispatcher;

  constructor(router: Router, options: AgentHttpProxyOptions) {
    this.#router = router;
    this.#dialTimeoutMs = options.dialTimeoutMs;
    this.#dispatcher = new TunnelDispatcher(
      (origin, { signal }) => {
        const m = ORIGIN.exec(origin);
        if (!m) throw new Error(`not an agent origin: ${origin}`);
        return this.#dial({ service: m[1]!, agentId: m[2]! }, signal);
      },
      {
        maxStreams: options.maxStreams ?? 10_000,
        // The router's own deadline fires first, with the clearer NoTunnelError.
        connectTimeoutMs: options.dialTimeoutMs + 1000,
        // Watches and `logs -f` may be silent for long; the client decides when to give up.
        bodyTimeout: 0,
      },
    );
  }

  /** Streams held by the dispatcher (in flight or kept alive). */
  get openStreams(): number {
    return this.#dispatcher.openStreams;
  }

  /**
   * Sends `req` to the target and streams the answer into `res`, both bodies streaming.
   * Rejects, with nothing written to `res`, when no response headers came from the agent
   * (see `describeProxyError`). Once headers are out, a failure of the agent's side resets `res`
   * and rejects with {@link ResponseAbortedError}; the client leaving resets it and resolves.
   */
  async forward(
    target: AgentTarget,
    req: IncomingMessage,
    res: ServerResponse,
    o: ForwardOptions,
  ): Promise<void> {
    if (!SERVICE_NAME.test(target.service)) throw new TypeError(`invalid service name ${target.service}`);
    // Until the response is under way, the client leaving aborts the request.
    const gone = new ClientGone(res, "client went away");
    res.once("close", gone.onClose);
    let upstream: Dispatcher.ResponseData;
    try {
      upstream = await this.#send(target, req, o, gone);
    } catch (err) {
      // The stream went away under the request before any answer (its tunnel or the replica
      // forwarding it was cut): once more on a fresh stream, wherever the agent is now, when
      // repeating it is safe. A body already streamed cannot be sent again.
      if (hasBody(req) || !IDEMPOTENT.has(req.method ?? "GET") || gone.aborted || !isStreamLost(err))
        throw err;
      upstream = await this.#send(target, req, o, gone);
    } finally {
      res.off("close", gone.onClose);
    }
    res.writeHead(upstream.statusCode, endToEnd(upstream.headers));
    // Whichever end fails first is the cause: the relay then tears down the other one.
    let first: "client" | "agent" | undefined;
    res.once("close", () => {
      first ??= "client";
    });
    upstream.body.once("error", () => {
      first ??= "agent";
    });
    try {
      await relayBody(upstream.body, res);
    } catch (err) {
      if (first !== "client") throw new ResponseAbortedError(target, err);
    }
  }

  /**
   * Carries an Upgrade request to the target: a stream of its own, a request head of kas's making
   * (the client's end-to-end headers less `drop`, then `Connection: Upgrade`, the client's
   * `Upgrade` and the identity), then bytes both ways until either side closes.
   * Rejects, with nothing written to `socket`, when no stream to the agent could be opened.
   */
  async upgrade(
    target: AgentTarget,
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    o: ForwardOptions,
  ): Promise<void> {
    if (!SERVICE_NAME.test(target.service)) throw new TypeError(`invalid service name ${target.service}`);
    const stream = await untilClientLeaves(socket, (signal) => this.#dial(target, signal));
    const headers = outgoingHeaders(req, o, true);
    headers.push("connection", "Upgrade", "upgrade", req.headers.upgrade ?? "");
    const lines = [`${req.method} ${o.path} HTTP/1.1`, `host: ${hostOf(target)}`];
    for (let i = 0; i < headers.length; i += 2) lines.push(`${headers[i]}: ${headers[i + 1]}`);
    stream.write(`${lines.join("\r\n")}\r\n\r\n`);
    if (head.length > 0) stream.write(head);
    await splice(socket, stream);
  }

  /** Lets requests in flight finish, closes kept-alive streams. */
  close(): Promise<void> {
    return this.#dispatcher.close();
  }

  /** Cuts everything at once. */
  destroy(): Promise<void> {
    return this.#dispatcher.destroy();
  }

  /** One try of a plain request; `gone` aborts it. */
  #send(target: AgentTarget, req: IncomingMessage, o: ForwardOptions, gone: ClientGone) {
    return this.#dispatcher.request({
      origin: `http://${hostOf(target)}`,
      path: o.path,
      method: (req.method ?? "GET") as "GET",
      headers: outgoingHeaders(req, o, false),
      body: hasBody(req) ? req : null,
      signal: gone,
    });
  }

  #dial(target: AgentTarget, signal: AbortSignal): Promise<Duplex> {
    return this.#router.dial(
      target.agentId,
      { kind: Kind.KIND_HTTP, service: target.service },
      { signal, deadline: Date.now() + this.#dialTimeoutMs },
    );
  }
}

/** Methods whose repetition has the effect of sending them once (RFC 9110 9.2.2). */
const IDEMPOTENT = new Set(["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]);

/**
 * Connection-level losses: the stream was reset or closed under the request (undici's "other side
 * closed", yamux's "stream reset by peer", its tunnel's session ended), as opposed to a refusal, a
 * timeout or no tunnel at all.
 */
const STREAM_LOST = new Set([
  "UND_ERR_SOCKET",
  "ECONNRESET",
  "EPIPE",
  "ERR_YAMUX_SESSION_CLOSED",
  "ERR_YAMUX_PEER_GOAWAY",
]);

function isStreamLost(err: unknown): boolean {
  return STREAM_LOST.has(String((err as { code?: unknown } | null)?.code));
}

/** The agent's side failed after the response headers were sent: the client got a truncated body. */
export class ResponseAbortedError extends Error {
  override name = "ResponseAbortedError";

  constructor(target: AgentTarget, cause: unknown) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    super(`response from agent ${target.agentId}'s service ${target.service} failed midway: ${reason}`, {
      cause,
    });
  }
}

/**
 * The Host the agent's service sees, for plain and upgraded requests alike; it also keys the
 * dispatcher's connection pools, one per agent and service. The agent applies its own target.
 */
function hostOf(target: AgentTarget): string {
  return `${target.service}.${target.agentId}.agent.kas`;
}

/**
 * What kas sends on: the client's end-to-end headers as a flat [name, value, …] list (duplicates
 * kept; hop-by-hop, `drop` and any identity header of the client's left out), then kas's identity.
 */
function outgoingHeaders(req: IncomingMessage, o: ForwardOptions, upgrade: boolean): string[] {
  const out = endToEndLines(req.rawHeaders, { upgrade, ...(o.drop && { drop: o.drop }) });
  if (o.identity !== undefined) out.push(IDENTITY_HEADER, o.identity);
  return out;
}

/**
 * Runs `work` with a signal that aborts ("client went away") if `client` closes meanwhile; the
 * close listener is removed when `work` settles.
 */
async function untilClientLeaves<T>(
  client: NodeJS.EventEmitter,
  work: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const abort = new AbortController();
  const onClose = () => abort.abort(new Error("client went away"));
  client.once("close", onClose);
  try {
    return await work(abort.signal);
  } finally {
    client.off("close", onClose);
  }
}
