import type { Duplex } from "node:stream";
import type * as grpc from "@grpc/grpc-js";
import { DEFAULT_OPEN_TIMEOUT_MS, Kind, openWithHeader, type StreamHeaderInit } from "../header/index.ts";
import type { TunnelClient } from "../session/tunnel-client.ts";
import { TunnelChannel, type TunnelChannelOptions } from "./tunnel-channel.ts";

export interface TunnelClientChannelOptions extends TunnelChannelOptions {
  /** Further header fields (service, routing metadata); the kind is always `KIND_GRPC`. */
  header?: Omit<StreamHeaderInit, "kind">;
  /** Covers waiting for a tunnel, opening the stream and the server's answer. Default 10 s. */
  openTimeoutMs?: number;
  /**
   * Attempts per call, the first included, for calls that end UNAVAILABLE before the server
   * answered anything (grpc-js `retryPolicy`); 1 turns retries off. Default 2: one retry.
   * A `grpc.service_config` in `channelOptions` replaces this.
   */
  maxAttempts?: number;
}

/** A tunnel that went away while a stream was being opened on it is worth one more try elsewhere. */
const OPEN_ATTEMPTS = 3;

/**
 * The service config applied to every method: UNAVAILABLE is retried. That status is what a call
 * gets when its connection is cut, or its stream drained past the grace (see `GrpcStreamServer.drain`);
 * grpc-js retries a call only until the server has sent it anything, so a call the server has
 * begun answering (a feed that streamed a while) reports UNAVAILABLE to the caller instead.
 * A retried call may have run on the server already: retry only what may run twice.
 */
function retryServiceConfig(maxAttempts: number): string {
  return JSON.stringify({
    methodConfig: [
      {
        name: [{}],
        retryPolicy: {
          maxAttempts,
          initialBackoff: "0.1s",
          maxBackoff: "1s",
          backoffMultiplier: 2,
          retryableStatusCodes: ["UNAVAILABLE"],
        },
      },
    ],
  });
}

/**
 * A grpc-js channel to the server at the other end of `client`'s tunnels: its HTTP/2 connection
 * runs over a `KIND_GRPC` stream on the ACTIVE tunnel, opened when the channel first connects and
 * again whenever that connection ends.
 *
 * Tunnel changes: when the server drains a tunnel (GoAway) it also sends HTTP/2 GOAWAY on the
 * gRPC connections that tunnel carries (`tunnelGrpcHandler`); grpc-js then sends new calls over a
 * new connection, which this channel opens on the replacement tunnel (`client.open()` waits for it),
 * while calls in flight finish on the old one. Calls made during the switch wait for the new
 * connection (grpc-js queues them while connecting); a stream opened on a tunnel that went away
 * meanwhile is opened again on the next. What can still fail is a call cut off mid-way (its
 * connection dropped, or drained past the grace): such calls end UNAVAILABLE and are retried
 * once (`maxAttempts`). A tunnel that just closes (network cut) ends the connection; the next
 * call opens a stream on the reconnected tunnel.
 */
export function tunnelClientChannel(
  client: TunnelClient,
  opts: TunnelClientChannelOptions = {},
): TunnelChannel {
  const { header, openTimeoutMs = DEFAULT_OPEN_TIMEOUT_MS, maxAttempts = 2, ...channelOpts } = opts;
  if (!(Number.isInteger(maxAttempts) && maxAttempts >= 1)) {
    throw new RangeError("tunnel client channel: maxAttempts must be an integer >= 1");
  }
  const init: StreamHeaderInit = { ...header, kind: Kind.KIND_GRPC };

  async function open(signal: AbortSignal): Promise<Duplex> {
    const started = Date.now();
    const left = () => Math.max(0, openTimeoutMs - (Date.now() - started));
    for (let attempt = 1; ; attempt++) {
      const session = await client.ready(left(), signal);
      try {
        return await openWithHeader(() => session.open(), init, { signal, timeoutMs: left() });
      } catch (err) {
        // Our SYN crossed the tunnel's GoAway (the server refuses it): the next tunnel may take it.
        const tunnelGone = session.draining || session.closed;
        if (!tunnelGone || signal.aborted || left() === 0 || attempt >= OPEN_ATTEMPTS) throw err;
      }
    }
  }

  const channelOptions: grpc.ChannelOptions = {
    ...(maxAttempts > 1 && { "grpc.service_config": retryServiceConfig(maxAttempts) }),
    ...channelOpts.channelOptions,
  };
  return new TunnelChannel(open, { ...channelOpts, channelOptions });
}
