import type { Duplex } from "node:stream";
import * as grpc from "@grpc/grpc-js";
import { installStreamConnector, OPEN_STREAM_OPTION } from "./grpc-js-internals.ts";

/**
 * Opens the stream one HTTP/2 connection runs over (e.g. a yamux stream with a `grpc` header).
 * `signal` aborts when the channel is closed.
 */
export type OpenGrpcStream = (signal: AbortSignal) => Promise<Duplex>;

export interface TunnelChannelOptions {
  /** `:authority` of every call (the server's `call.getHost()`). Default `"grpc-tunnel"`. */
  authority?: string;
  /** Names the channel in `getTarget()` and the client's `call.getPeer()`. Default `"tunnel"`. */
  label?: string;
  /** Further grpc-js channel options: keepalive, message sizes, reconnect backoff, … */
  channelOptions?: grpc.ChannelOptions;
  /** Default insecure: the tunnel under the stream is already authenticated and encrypted. */
  credentials?: grpc.ChannelCredentials;
}

/**
 * A grpc-js channel whose HTTP/2 connection runs over a stream from `open()`: no socket, one
 * stream per connection, every call multiplexed on it. When the stream breaks, the channel goes
 * idle and the next call opens a new one. If `open()` rejects, calls fail with UNAVAILABLE
 * carrying its message, and grpc-js retries the connection with backoff
 * (`grpc.initial_reconnect_backoff_ms`, default 1 s).
 */
export class TunnelChannel extends grpc.Channel {
  readonly #abort: AbortController;

  constructor(open: OpenGrpcStream, opts: TunnelChannelOptions = {}) {
    installStreamConnector();
    const abort = new AbortController();
    const openUnlessClosed = async (): Promise<Duplex> => {
      abort.signal.throwIfAborted();
      const stream = await open(abort.signal);
      // Opened after close(): grpc-js would drop it without destroying it.
      if (abort.signal.aborted) {
        stream.destroy();
        throw abort.signal.reason;
      }
      return errorsAsConnectionLoss(stream);
    };
    const label = (opts.label ?? "tunnel").replace(/[^\w.-]/g, "_");
    // A path under /dev/null can never be a socket: should the hook ever not engage, grpc-js fails
    // with ENOTDIR instead of reaching something real. The `unix` resolver needs no DNS and no proxy.
    super(`unix:/dev/null/grpc-tunnel/${label}`, opts.credentials ?? grpc.credentials.createInsecure(), {
      ...opts.channelOptions,
      "grpc.default_authority": opts.authority ?? "grpc-tunnel",
      "grpc.enable_http_proxy": 0,
      // Subchannels are keyed by option identity anyway; a local pool keeps them out of the global one.
      "grpc.use_local_subchannel_pool": 1,
      [OPEN_STREAM_OPTION]: openUnlessClosed,
    });
    this.#abort = abort;
  }

  /** Calls already running finish on their stream; no new stream is opened. */
  override close(): void {
    this.#abort.abort(new Error("grpc tunnel channel closed"));
    super.close();
  }
}

/** Socket error codes grpc-js reads as a lost connection (UNAVAILABLE); it reads any other as INTERNAL. */
const CONNECTION_LOST = new Set(["ECONNRESET", "ETIMEDOUT"]);

/**
 * The stream is this channel's connection: whatever ends it with an error (its tunnel cut, a write
 * timeout, the peer failing) is a lost connection, which calls should report as UNAVAILABLE and
 * may retry. grpc-js decides that by the socket error's `code` alone, so errors with other codes
 * are passed on as ECONNRESET, with the original as `cause` and its message kept.
 */
function errorsAsConnectionLoss(stream: Duplex): Duplex {
  const emit = stream.emit;
  stream.emit = function (this: Duplex, event: string | symbol, ...args: unknown[]): boolean {
    const err = args[0] as (Error & { code?: unknown }) | undefined;
    if (event === "error" && err && !CONNECTION_LOST.has(String(err.code))) {
      args[0] = Object.assign(new Error(err.message, { cause: err }), { code: "ECONNRESET" });
    }
    return emit.call(this, event, ...args);
  } as Duplex["emit"];
  return stream;
}

export function createTunnelChannel(open: OpenGrpcStream, opts?: TunnelChannelOptions): TunnelChannel {
  return new TunnelChannel(open, opts);
}

/**
 * Client options for a generated or `makeGenericClientConstructor` client:
 * `new FooClient("tunnel", grpc.credentials.createInsecure(), tunnelClientOptions(open))`
 * (the address and credentials given to the constructor are then ignored).
 */
export function tunnelClientOptions(open: OpenGrpcStream, opts?: TunnelChannelOptions): grpc.ClientOptions {
  return { channelOverride: createTunnelChannel(open, opts) };
}
