import type { Duplex } from "node:stream";
import {
  Kind,
  RejectCode,
  StreamDispatcher,
  type StreamHeader,
  StreamRejectedError,
} from "../tunnel/header/index.ts";
import { serveTunnels, type TunnelOptions, type TunnelServer } from "../tunnel/session/index.ts";
import { HandshakeRejection, type ListenOptions } from "../tunnel/transport/index.ts";
import { openLocal } from "./local-open.ts";
import type { LocalRegistry } from "./local-registry.ts";
import type { PeerAuth } from "./peer-auth.ts";
import { splice } from "./splice.ts";

/** Start of the reason a replica gives when it holds no tunnel for the agent; see {@link isNoTunnel}. */
export const NO_TUNNEL_REASON = "no tunnel for agent ";

export interface PeerServerOptions {
  host?: string;
  port?: number;
  tls?: ListenOptions<PeerIdentity>["tls"];
  auth: PeerAuth;
  local: LocalRegistry;
  /** This replica's id, for refusal reasons. */
  replicaId: string;
  /** Deadline for the agent's verdict on a forwarded header. Default 10 s. */
  openTimeoutMs?: number;
  tunnel?: TunnelOptions;
  limits?: PeerListenLimits;
}

/** What bounds the private API's connections: its handshake deadline, connection cap… (see `ListenOptions`). */
export type PeerListenLimits = Pick<
  ListenOptions<PeerIdentity>,
  "handshakeTimeoutMs" | "maxConnections" | "maxStreamsPerConnection" | "onLimit"
>;

export interface PeerIdentity {
  /** The replica that dialed (the token's subject). */
  replicaId: string;
}

interface StreamContext {
  peer: PeerIdentity;
  /** The stream to the agent, once its verdict was "accepted". */
  upstream?: Duplex;
}

/**
 * The private API: other replicas forward streams here. Each forwarded stream carries the
 * caller's header unchanged; it is accepted only once the agent, over a tunnel this replica
 * holds, has accepted the same header, so the forwarder sees the agent's verdict, or
 * NOT_FOUND / UNAVAILABLE with {@link NO_TUNNEL_REASON} when there is no tunnel here. Never
 * forwards further: a stream makes at most one hop between replicas.
 */
export function servePeers(options: PeerServerOptions): Promise<TunnelServer<PeerIdentity>> {
  const { auth, local, replicaId, openTimeoutMs = 10_000 } = options;
  // A failed handler has its peer stream destroyed by the dispatcher; the agent's goes with it.
  const dispatcher = new StreamDispatcher<StreamContext>({
    onHandlerError: (_err, _header, ctx) => ctx.upstream?.destroy(),
  });
  const admit = async (header: StreamHeader, ctx: StreamContext) => {
    const upstream = await openLocal(local, header.agentId, header, { timeoutMs: openTimeoutMs });
    if (!upstream) {
      const draining = local.tunnels(header.agentId).size > 0;
      throw new StreamRejectedError(
        draining ? RejectCode.REJECT_CODE_UNAVAILABLE : RejectCode.REJECT_CODE_NOT_FOUND,
        `${NO_TUNNEL_REASON}${header.agentId} at kas replica ${replicaId}${draining ? " (draining)" : ""}`,
      );
    }
    ctx.upstream = upstream;
  };
  const handler = (stream: Duplex, _header: StreamHeader, ctx: StreamContext) => {
    void splice(stream, ctx.upstream!);
  };
  for (const kind of Object.values(Kind)) {
    if (typeof kind !== "number" || kind === Kind.KIND_UNSPECIFIED || kind === Kind.UNRECOGNIZED) continue;
    dispatcher.register(kind, handler, { admit });
  }

  return serveTunnels<PeerIdentity>({
    host: options.host,
    port: options.port,
    tls: options.tls,
    tunnel: options.tunnel,
    ...options.limits,
    authenticate: async (request) => {
      const match = /^Bearer\s+(\S+)$/i.exec(String(request.headers.authorization ?? ""));
      if (!match) throw new HandshakeRejection(401, "a bearer token is required");
      try {
        return { replicaId: await auth.verify(match[1]!) };
      } catch (err) {
        throw new HandshakeRejection(401, `invalid peer token: ${(err as Error).message}`);
      }
    },
    onSession: (session) => {
      session.on("stream", (stream) => {
        const ctx: StreamContext = { peer: session.identity };
        void dispatcher.handle(stream, ctx).then((result) => {
          // Accepted by the agent but the peer went away meanwhile: do not leak the agent stream.
          if (!result.accepted) ctx.upstream?.destroy();
        });
      });
    },
  });
}

/** True when a peer's refusal means "no tunnel here" (try elsewhere), not the agent's own verdict. */
export function isNoTunnel(err: unknown): err is StreamRejectedError {
  return (
    err instanceof StreamRejectedError &&
    (err.code === RejectCode.REJECT_CODE_NOT_FOUND || err.code === RejectCode.REJECT_CODE_UNAVAILABLE) &&
    err.reason.startsWith(NO_TUNNEL_REASON)
  );
}
