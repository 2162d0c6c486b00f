// HTTP over tunnel streams: an undici Dispatcher whose connections are opened streams, and a
// node:http server fed with accepted streams (Upgrade and CONNECT included).
export type { OpenOriginStream } from "./connector.ts";
export { type HttpStreamServer, serveHttp } from "./serve.ts";
export { asSocket, type SocketLike, type StreamPeer } from "./socket-shim.ts";
export { TunnelDispatcher, type TunnelDispatcherOptions } from "./tunnel-dispatcher.ts";
