import { type ListenOptions, listen, type TunnelListener } from "../transport/listen.ts";
import { DEFAULT_GRACE_MS } from "./grace.ts";
import { type TunnelOptions, TunnelSession } from "./tunnel-session.ts";

export interface TunnelServerOptions<I> extends Omit<ListenOptions<I>, "onConnection"> {
  /** Multiplexer settings for every accepted tunnel. */
  tunnel?: TunnelOptions;
  /** Each authenticated tunnel, as soon as it is up (attach 'stream' listeners here). */
  onSession: (session: TunnelSession<I>) => void;
}

export interface TunnelServer<I> {
  readonly url: string;
  readonly listener: TunnelListener<I>;
  /** Tunnels currently up. */
  readonly sessions: ReadonlySet<TunnelSession<I>>;
  /**
   * Graceful shutdown: stop accepting, GoAway to every tunnel (clients dial elsewhere), give the
   * streams in flight up to `graceMs` to finish, then close what is left.
   */
  close(graceMs?: number): Promise<void>;
}

/** Listens for tunnels (HTTP/1.1 and HTTP/2 on one port) and wraps each in a TunnelSession. */
export async function serveTunnels<I = undefined>(options: TunnelServerOptions<I>): Promise<TunnelServer<I>> {
  const sessions = new Set<TunnelSession<I>>();
  const listener = await listen<I>({
    ...options,
    onConnection: (transport) => {
      const session = new TunnelSession(transport, "server", options.tunnel);
      sessions.add(session);
      session.on("close", () => sessions.delete(session));
      options.onSession(session);
    },
  });
  return {
    url: listener.url,
    listener,
    sessions,
    async close(graceMs = DEFAULT_GRACE_MS) {
      listener.server.close(); // no new connections; live tunnels carry on while they drain
      await Promise.all([...sessions].map((s) => s.close(graceMs)));
      await listener.close(1000);
    },
  };
}
