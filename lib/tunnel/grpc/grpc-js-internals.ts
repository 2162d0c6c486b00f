/**
 * The ONLY file that reaches into @grpc/grpc-js internals.
 *
 * grpc-js has no public hook to give a client channel its own byte stream: every subchannel connects
 * with `net.connect`. This file makes a channel that carries the option {@link OPEN_STREAM_OPTION}
 * take its stream from a function instead. Channels without that option are untouched.
 *
 * What it relies on (checked when installed, and by test/tunnel/grpc/grpc-js-internals.test.ts):
 *  1. Module `@grpc/grpc-js/build/src/transport.js` exports the class `Http2SubchannelConnector`;
 *     `subchannel-pool.js` (`getOrCreateSubchannel`) constructs one per subchannel.
 *  2. Its private method `tcpConnect(address, options): Promise<net.Socket>` is the single place the
 *     byte stream comes from. `connect()` awaits it, calls `setNoDelay()` on the result, passes it to
 *     the channel credentials' `SecureConnector.connect(socket)` (insecure: returned as is) and then to
 *     `http2.connect(url, { createConnection: () => socket })`, which accepts any Duplex.
 *  3. The `options` given to `tcpConnect` are the channel options (internal-channel.ts
 *     `createSubchannel` copies them, dropping only keys starting with
 *     `grpc.internal.no_subchannel`), so a function-valued channel option reaches it by identity.
 * The wrapper below replaces `Http2SubchannelConnector.prototype.tcpConnect` once, process-wide.
 *
 * On the server side, {@link injectorServer} relies on:
 *  4. `Server.createConnectionInjector(credentials)` creates one `node:http2` server and records it
 *     as a key of the server's private Map `http2Servers` before returning, and its
 *     `injectConnection(stream)` is `http2Server.emit("connection", stream)`, so the server's
 *     "session" event for that stream fires synchronously inside it.
 */
import type { Http2Server } from "node:http2";
import { createRequire } from "node:module";
import type { Duplex } from "node:stream";

/** Channel option whose value is `() => Promise<Duplex>`; read by the patched connector. */
export const OPEN_STREAM_OPTION = "grpc-tunnel.open_stream";

type OpenStream = () => Promise<Duplex>;

type TcpConnect = (this: unknown, address: unknown, options: Record<string, unknown>) => Promise<unknown>;

const require = createRequire(import.meta.url);
const TRANSPORT_MODULE = "@grpc/grpc-js/build/src/transport.js";
const PATCHED = Symbol.for("gitlab-agent-ts.grpc-tunnel.tcpConnect");

function grpcJsVersion(): string {
  try {
    return (require("@grpc/grpc-js/package.json") as { version: string }).version;
  } catch {
    return "unknown";
  }
}

function internalsMoved(what: string): Error {
  return new Error(
    `grpc tunnel: @grpc/grpc-js ${grpcJsVersion()} internals moved: ${what}. ` +
      "lib/tunnel/grpc/grpc-js-internals.ts must be adapted to this grpc-js version.",
  );
}

/** The connector prototype, or a clear error naming the internal that is missing. */
function connectorPrototype(): { tcpConnect: TcpConnect; connect: unknown } {
  let mod: { Http2SubchannelConnector?: unknown };
  try {
    mod = require(TRANSPORT_MODULE) as typeof mod;
  } catch (err) {
    throw internalsMoved(`cannot load module ${TRANSPORT_MODULE} (${(err as Error).message})`);
  }
  const ctor = mod.Http2SubchannelConnector;
  if (typeof ctor !== "function") {
    throw internalsMoved(`${TRANSPORT_MODULE} no longer exports class Http2SubchannelConnector`);
  }
  const proto = ctor.prototype as { tcpConnect?: unknown; connect?: unknown };
  if (typeof proto.connect !== "function") {
    throw internalsMoved("Http2SubchannelConnector.prototype.connect is not a function");
  }
  if (typeof proto.tcpConnect !== "function") {
    throw internalsMoved("Http2SubchannelConnector.prototype.tcpConnect is not a function");
  }
  if (!String(proto.connect).includes("this.tcpConnect(")) {
    throw internalsMoved("Http2SubchannelConnector.prototype.connect no longer calls this.tcpConnect()");
  }
  return proto as { tcpConnect: TcpConnect; connect: unknown };
}

/** connect() calls setNoDelay() on what tcpConnect returns; a plain Duplex has none. */
function asSocketLike(stream: Duplex): Duplex {
  const s = stream as Duplex & { setNoDelay?: unknown };
  if (typeof s.setNoDelay !== "function") {
    Object.defineProperty(s, "setNoDelay", { value: () => s, configurable: true });
  }
  return s;
}

/**
 * Installs the stream hook (idempotent). Throws, naming the internal, if this grpc-js version lacks
 * what the hook needs.
 */
export function installStreamConnector(): void {
  const proto = connectorPrototype();
  if ((proto.tcpConnect as { [PATCHED]?: boolean })[PATCHED]) return;
  const original = proto.tcpConnect;
  const tcpConnect: TcpConnect = function (this: unknown, address, options) {
    const open = options?.[OPEN_STREAM_OPTION];
    if (typeof open !== "function") return original.call(this, address, options);
    return (open as OpenStream)().then(asSocketLike);
  };
  Object.defineProperty(tcpConnect, PATCHED, { value: true });
  proto.tcpConnect = tcpConnect;
}

/** True when the hook is in place (for tests that must fail loudly if it is not). */
export function streamConnectorInstalled(): boolean {
  return Boolean((connectorPrototype().tcpConnect as { [PATCHED]?: boolean })[PATCHED]);
}

/**
 * `server.createConnectionInjector(credentials)` and the `node:http2` server behind it (grpc-js
 * does not expose it): its "session" event says which HTTP/2 session each injected stream got.
 */
export function injectorServer(
  server: object,
  credentials: unknown,
): { injector: { injectConnection(s: Duplex): void; destroy(): void }; http2Server: Http2Server } {
  const servers = (server as { http2Servers?: unknown }).http2Servers;
  if (!(servers instanceof Map)) throw internalsMoved("Server has no Map http2Servers");
  const before = new Set(servers.keys());
  const injector = (
    server as { createConnectionInjector(c: unknown): { injectConnection(s: Duplex): void; destroy(): void } }
  ).createConnectionInjector(credentials);
  const created = [...servers.keys()].filter((k) => !before.has(k));
  if (created.length !== 1 || typeof (created[0] as { emit?: unknown }).emit !== "function") {
    throw internalsMoved("createConnectionInjector no longer records its http2 server in http2Servers");
  }
  return { injector, http2Server: created[0] as Http2Server };
}
