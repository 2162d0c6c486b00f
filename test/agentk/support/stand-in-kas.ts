// A stand-in for kas made from the tunnel library alone (so agentk's tests do not depend on
// cmd/kas): it authenticates agents by a static token, records every handshake, and talks to
// the agent with typed stream headers, as kas does.
import { EventEmitter, once } from "node:events";
import type { IncomingHttpHeaders } from "node:http";
import { type AddressInfo, createServer, type Server, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import {
  HandshakeRejection,
  Kind,
  openWithHeader,
  serveTunnels,
  TunnelDispatcher,
  type TunnelServer,
  type TunnelSession,
} from "../../../lib/tunnel/index.ts";

export const AGENT_ID = "42";

export interface Handshake {
  authorized: boolean;
  headers: IncomingHttpHeaders;
}

export interface StandInKasOptions {
  /** The one agent token accepted. */
  token: string;
  /** Default 0 (ephemeral); a fixed port lets a restarted stand-in take over the address. */
  port?: number;
  tls?: { cert: string; key: string };
}

export interface StandInKas {
  /** ws:// or wss:// URL agents dial. */
  readonly url: string;
  readonly port: number;
  /** Every handshake, accepted or not, in order. */
  readonly handshakes: Handshake[];
  readonly server: TunnelServer<{ agentId: string }>;
  /** "handshake" for each handshake, "session" for each accepted tunnel. */
  readonly events: EventEmitter<{ handshake: []; session: [] }>;
  /** The newest agent tunnel, waiting for one up to `timeoutMs`. */
  session(timeoutMs?: number): Promise<TunnelSession<{ agentId: string }>>;
  /** Resolves once `count` handshakes have arrived. */
  handshakeCount(count: number, timeoutMs?: number): Promise<void>;
  /** A stream to the agent's `service` (KIND_HTTP), positioned after the agent's "accepted". */
  open(service: string): Promise<Duplex>;
  /** An undici dispatcher whose connections are KIND_HTTP streams to the agent's `service`. */
  http(service: string): TunnelDispatcher;
  /**
   * A local plain-HTTP endpoint (`http://127.0.0.1:<port>`) that splices each TCP connection
   * onto a new stream to the agent's `service`: point any HTTP client (the real Kubernetes
   * client included) at it and its requests, upgrades and watches travel through the tunnel.
   */
  forward(service: string): Promise<{ url: string; port: number; close(): Promise<void> }>;
  close(): Promise<void>;
}

export async function startStandInKas(options: StandInKasOptions): Promise<StandInKas> {
  const handshakes: Handshake[] = [];
  const events = new EventEmitter<{ handshake: []; session: [] }>();
  events.setMaxListeners(0);
  const sessions: TunnelSession<{ agentId: string }>[] = [];
  const dispatchers: TunnelDispatcher[] = [];
  const forwarders: { close(): Promise<void> }[] = [];

  const server = await serveTunnels<{ agentId: string }>({
    host: "127.0.0.1",
    port: options.port ?? 0,
    ...(options.tls && { tls: options.tls }),
    authenticate: (req) => {
      const authorized = req.headers.authorization === `Bearer ${options.token}`;
      handshakes.push({ authorized, headers: { ...req.headers } });
      events.emit("handshake");
      if (!authorized) throw new HandshakeRejection(401, "agent token is invalid or revoked");
      return { agentId: AGENT_ID };
    },
    onSession: (session) => {
      sessions.push(session);
      events.emit("session");
    },
  });

  const live = () => sessions.findLast((s) => !s.closed && !s.draining);
  const session = async (timeoutMs = 20_000) => {
    const signal = AbortSignal.timeout(timeoutMs);
    while (!live()) await once(events, "session", { signal });
    return live()!;
  };
  const open = async (service: string) =>
    openWithHeader(async () => (await session()).open(), {
      kind: Kind.KIND_HTTP,
      agentId: AGENT_ID,
      service,
    });

  const port = Number(new URL(server.url).port);
  return {
    url: server.url,
    port,
    handshakes,
    server,
    events,
    session,
    async handshakeCount(count, timeoutMs = 20_000) {
      const signal = AbortSignal.timeout(timeoutMs);
      while (handshakes.length < count) await once(events, "handshake", { signal });
    },
    open,
    http(service) {
      const dispatcher = new TunnelDispatcher(() => open(service));
      dispatchers.push(dispatcher);
      return dispatcher;
    },
    async forward(service) {
      const forwarder = await spliceServer(() => open(service));
      forwarders.push(forwarder);
      return forwarder;
    },
    async close() {
      await Promise.all(forwarders.map((f) => f.close()));
      await Promise.all(dispatchers.map((d) => d.destroy()));
      await server.close(1000);
    },
  };
}

/** A loopback TCP server that pipes every connection into a freshly opened stream. */
async function spliceServer(open: () => Promise<Duplex>) {
  const sockets = new Set<Socket | Duplex>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    socket.pause();
    open().then(
      (stream) => {
        sockets.add(stream);
        stream.once("close", () => sockets.delete(stream));
        stream.on("error", () => socket.destroy());
        socket.once("close", () => stream.destroy());
        stream.once("close", () => socket.destroy());
        socket.pipe(stream);
        stream.pipe(socket);
      },
      (err: Error) => {
        const body = `stand-in kas: ${err.message}\n`;
        socket.end(
          `HTTP/1.1 502 Bad Gateway\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        );
      },
    );
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}
