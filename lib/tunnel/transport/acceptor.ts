import type { IncomingMessage } from "node:http";
import type * as http2 from "node:http2";
import type { Duplex } from "node:stream";
import { type AttachableServer, type AttachOptions, attachEndpoint, isTunnelConnect } from "./attach.ts";
import { TransportConnection } from "./connection.ts";
import {
  CloseCode,
  DEFAULT_HANDSHAKE_TIMEOUT_MS,
  DEFAULT_MAX_PAYLOAD,
  DEFAULT_MAX_PENDING_HANDSHAKES,
  DEFAULT_PATH,
  RETRY_SCHEDULED_HEADER,
  TUNNEL_SUBPROTOCOL,
} from "./constants.ts";
import { HandshakeRejection } from "./errors.ts";
import { HandshakePacer } from "./handshake-pacer.ts";
import { type HandshakeRequest, pathnameOf, requestFromH1, requestFromH2 } from "./handshake-request.ts";
import { type Refusal, validateH1, validateH2 } from "./handshake-validate.ts";
import { InboundGate } from "./inbound-gate.ts";
import type { AcceptorOptions, Authenticate, HandshakeStats, RejectedHandshake } from "./options.ts";
import { positive } from "./options.ts";
import { type HandshakeReply, h1Reply, h2Reply } from "./server-reply.ts";

/**
 * Accepts tunnel WebSockets on HTTP servers: HTTP/1.1 Upgrade ('upgrade' events) and RFC 8441
 * extended CONNECT on HTTP/2 ('stream' events). Authentication runs before the upgrade completes.
 */
export class TunnelAcceptor<I = undefined> {
  readonly path: string;
  readonly subprotocol: string;
  readonly maxPayload: number;
  readonly maxPendingHandshakes: number;
  readonly handshakeTimeoutMs: number;
  readonly #authenticate: Authenticate<I> | undefined;
  readonly #onConnection: (connection: TransportConnection<I>) => void;
  readonly #onReject: ((rejected: RejectedHandshake) => void) | undefined;
  readonly #connections = new Set<TransportConnection<I>>();
  readonly #pending = new Set<AbortController>();
  readonly #pacer: HandshakePacer | undefined;
  /** With the pacer: what a passed handshake's peer then says is paced too (inbound-gate.ts). */
  readonly #gate: InboundGate | undefined;
  #refusedScheduled = 0;
  #refusedFlat = 0;
  #closing = false;

  constructor(options: AcceptorOptions<I>) {
    this.path = options.path ?? DEFAULT_PATH;
    if (!this.path.startsWith("/")) throw new TypeError(`path must start with "/", got ${this.path}`);
    this.subprotocol = options.subprotocol ?? TUNNEL_SUBPROTOCOL;
    this.maxPayload = positive("maxPayload", options.maxPayload, DEFAULT_MAX_PAYLOAD);
    this.maxPendingHandshakes = positive(
      "maxPendingHandshakes",
      options.maxPendingHandshakes,
      DEFAULT_MAX_PENDING_HANDSHAKES,
    );
    this.handshakeTimeoutMs = positive(
      "handshakeTimeoutMs",
      options.handshakeTimeoutMs,
      DEFAULT_HANDSHAKE_TIMEOUT_MS,
    );
    if (options.maxLoopUtilization !== undefined && options.maxLoopUtilization !== 1) {
      this.#pacer = new HandshakePacer(options.maxLoopUtilization);
      this.#gate = new InboundGate();
    }
    this.#authenticate = options.authenticate;
    this.#onConnection = options.onConnection;
    this.#onReject = options.onReject;
  }

  get pendingHandshakes(): number {
    return this.#pending.size;
  }

  /** What the handshakes are doing now, and the refusals at the pending limit so far. */
  get handshakeStats(): HandshakeStats {
    const capacity = this.#pacer?.capacityPerMs;
    return {
      pending: this.#pending.size,
      paced: this.#pacer?.waiting ?? 0,
      refusedScheduled: this.#refusedScheduled,
      refusedFlat: this.#refusedFlat,
      pacedCapacityPerSecond: capacity === undefined ? undefined : capacity * 1000,
    };
  }

  get connections(): ReadonlySet<TransportConnection<I>> {
    return this.#connections;
  }

  /** An 'upgrade' handler. Returns false, touching nothing, when the request is for another path. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    if (pathnameOf(req.url ?? "") !== this.path) return false;
    const request = requestFromH1(req);
    this.#handshake(request, h1Reply(req, socket, head), validateH1(request, this.subprotocol));
    return true;
  }

  /** A 'stream' handler. Returns false, touching nothing, unless it is an extended CONNECT to the path. */
  handleStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): boolean {
    if (!isTunnelConnect(headers, this.path)) return false;
    const request = requestFromH2(stream, headers);
    const refusal = validateH2(request, headers[":protocol"], this.subprotocol);
    this.#handshake(request, h2Reply(stream), refusal);
    return true;
  }

  /**
   * Serves the endpoint on `server` (any of http, https, http2 with or without allowHTTP1) and
   * turns on SETTINGS_ENABLE_CONNECT_PROTOCOL for HTTP/2 servers. Returns a function that detaches.
   */
  attach(server: AttachableServer, options: AttachOptions = {}): () => void {
    return attachEndpoint(this, server, options);
  }

  /**
   * Refuses new handshakes (503), aborts pending ones, closes live connections with `code` and waits
   * for them; connections still open after `timeoutMs` are terminated.
   */
  async close(
    code: number = CloseCode.goingAway,
    reason = "server shutting down",
    timeoutMs = 5000,
  ): Promise<void> {
    this.#closing = true;
    for (const controller of this.#pending) controller.abort(new Error("server shutting down"));
    const live = [...this.#connections];
    for (const connection of live) connection.close(code, reason);
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    await Promise.race([Promise.all(live.map((c) => c.closed)), deadline]);
    clearTimeout(timer);
    for (const connection of live) connection.destroy();
    await Promise.all(live.map((c) => c.closed));
  }

  #handshake(request: HandshakeRequest, reply: HandshakeReply, refusal: Refusal | undefined): void {
    const immediate = refusal ?? this.#admissionRefusal(request);
    if (immediate) this.#refuse(request, reply, immediate);
    else void this.#complete(request, reply);
  }

  #admissionRefusal(request: HandshakeRequest): Refusal | undefined {
    if (this.#closing) return { status: 503, message: "server shutting down" };
    if (this.#pending.size < this.maxPendingHandshakes) return undefined;
    const message = `too many handshakes in progress (limit ${this.maxPendingHandshakes}); retry later`;
    // With nothing to schedule by, a flat second: a floor only. (A herd's first wave meets the 128
    // still being authenticated, none held back yet: the rate measured before schedules it.)
    if (!this.#pacer?.canSchedule) {
      this.#refusedFlat++;
      return { status: 503, message, headers: { "Retry-After": "1" } };
    }
    this.#refusedScheduled++;
    // Every handshake in progress goes through the pacer once authenticated, those still being
    // authenticated too: come back when the queue ahead of you has gone through, not in the next
    // second. Refused before authentication: the queue is shared by client address (see
    // retryAfterSeconds).
    const retryAfter = String(this.#pacer.retryAfterSeconds(request.remoteAddress, this.#pending.size));
    return { status: 503, message, headers: { "Retry-After": retryAfter, [RETRY_SCHEDULED_HEADER]: "1" } };
  }

  async #complete(request: HandshakeRequest, reply: HandshakeReply): Promise<void> {
    const controller = new AbortController();
    this.#pending.add(controller);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error(`handshake not completed within ${this.handshakeTimeoutMs} ms`));
    }, this.handshakeTimeoutMs);
    const offGone = reply.onGone(() => controller.abort(new Error("client went away")));
    try {
      const identity = await this.#identify(request, controller.signal);
      if (this.#pacer) await this.#pacer.pass(controller.signal);
      if (reply.gone()) return;
      const ws = reply.accept(this.subprotocol, this.maxPayload);
      if (ws === undefined) return;
      // Created synchronously on open so the first message has a listener.
      const connection = new TransportConnection<I>({
        ws,
        httpVersion: reply.httpVersion,
        remoteAddress: reply.remoteAddress,
        identity,
        ...(this.#gate && { gate: this.#gate }),
      });
      this.#track(connection);
      this.#deliver(connection);
    } catch (err) {
      if (reply.gone()) return;
      if (timedOut) {
        const message = `handshake timed out: authentication did not finish within ${this.handshakeTimeoutMs} ms`;
        this.#refuse(request, reply, { status: 503, message }, err);
      } else if (err instanceof HandshakeRejection) {
        this.#refuse(request, reply, {
          status: err.status,
          message: err.message,
          headers: { ...err.headers },
        });
      } else if (this.#closing) {
        this.#refuse(request, reply, { status: 503, message: "server shutting down" });
      } else {
        const message = "internal error while authenticating the connection";
        this.#refuse(request, reply, { status: 500, message }, err);
      }
    } finally {
      clearTimeout(timer);
      offGone();
      this.#pending.delete(controller);
    }
  }

  /**
   * Its own function: a listener created in #complete would keep that function's whole closure
   * context (the handshake's AbortController among it) alive as long as the connection lives.
   */
  #track(connection: TransportConnection<I>): void {
    this.#connections.add(connection);
    connection.on("close", () => this.#connections.delete(connection));
  }

  #deliver(connection: TransportConnection<I>): void {
    try {
      this.#onConnection(connection);
    } catch (err) {
      // Like a throwing event listener: drop the connection and let the error surface.
      connection.destroy();
      queueMicrotask(() => {
        throw err;
      });
    }
  }

  /** Runs the hook, but gives up when the signal fires even if the hook ignores it. */
  #identify(request: HandshakeRequest, signal: AbortSignal): Promise<I> {
    const authenticate = this.#authenticate;
    if (authenticate === undefined) return Promise.resolve(undefined as I);
    return new Promise<I>((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      Promise.resolve()
        .then(() => authenticate(request, { signal }))
        .then(resolve, reject)
        .finally(() => signal.removeEventListener("abort", onAbort));
    });
  }

  #refuse(request: HandshakeRequest, reply: HandshakeReply, refusal: Refusal, error?: unknown): void {
    reply.refuse(refusal);
    this.#onReject?.({ request, status: refusal.status, message: refusal.message, error });
  }
}
