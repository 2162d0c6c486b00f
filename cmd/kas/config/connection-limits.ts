// kas's `connection_limits` section: the limits every listener applies to its connections (see
// tool/http/serve/connection-limits.ts and the README's "Listener limits"). One set for every
// listener: an operator tunes them together, and per-listener knobs would multiply --help by six.
import { z } from "zod";
import { countSetting, durationSetting } from "../../../tool/config/kinds.ts";

export const connectionLimitsKasSection = z.object({
  headerTimeoutMs: durationSetting({
    default: "10s",
    doc: "HTTP fronts (API, Kubernetes API proxy, observability, dashboard): a request's headers must arrive within this (a new connection's first request counted from the connect, TLS handshake included); HTTP/2 (gRPC on the API port): its preface. Late: 408 and the connection is closed. Also the private API's whole handshake deadline (the agent listener has agent.listen.handshake_timeout).",
  }),
  bodyTimeoutMs: durationSetting({
    default: "60s",
    doc: "HTTP fronts: after its headers, a request's body must arrive within this (408 and close otherwise). Responses (watches, logs -f, event streams) have no deadline.",
  }),
  idleTimeoutMs: durationSetting({
    default: "60s",
    doc: "A connection with no request in flight is closed after this long: HTTP/1.1 keep-alive, and HTTP/2 connections to the API port without a call (gRPC max_connection_idle). Upgraded connections (exec, port-forward) and tunnels are not idle-timed (tunnels have keepalive).",
  }),
  maxConnections: countSetting({
    default: 10000,
    doc: "Connections open at once on each listener but the agents' (agent.listen.max_connections); past it, new ones are closed as they arrive (counted in kas_connections_closed_for_limit_total, and a warning at most a minute apart).",
  }),
  maxStreamsPerConnection: countSetting({
    default: 100,
    doc: "HTTP/2 (gRPC on the API port, tunnels over HTTP/2 on the agent and private listeners): streams open at once on one connection.",
  }),
  unauthenticatedTimeoutMs: durationSetting({
    default: "30s",
    doc: "HTTP/2 connections to the API port that have made no call with a valid JWT within this are closed. (Tunnel listeners close an HTTP/2 connection that carries no tunnel after their handshake_timeout.)",
  }),
});

export type ConnectionLimitsKasConfig = z.output<typeof connectionLimitsKasSection>;
