import { WebSocket } from "ws";
import { TransportConnection } from "./connection.ts";
import { MAX_ERROR_BODY_BYTES } from "./constants.ts";
import type { DialConfig } from "./dial-config.ts";
import { HandshakeError, toDialError } from "./errors.ts";
import { createProxyAgent } from "./proxy.ts";
import { readBody } from "./wait.ts";

/** WebSocket over an HTTP/1.1 Upgrade, with ws' client (it checks Sec-WebSocket-Accept and the subprotocol). */
export function dialH1(target: URL, cfg: DialConfig, signal: AbortSignal): Promise<TransportConnection> {
  return new Promise((resolve, reject) => {
    const url = target.href;
    const agent = cfg.proxy ? createProxyAgent(cfg.proxy, signal) : undefined;
    let proxyRefused = false;
    agent?.on("proxyConnect", (connect: { statusCode: number }) => {
      proxyRefused = connect.statusCode !== 200;
    });

    const ws = new WebSocket(target, [cfg.subprotocol], {
      headers: { ...cfg.headers },
      perMessageDeflate: false,
      followRedirects: false,
      maxPayload: cfg.maxPayload,
      agent,
      ...cfg.tls,
    });

    let settled = false;
    let remoteAddress: string | undefined;
    const fail = (err: Error) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener("abort", onAbort);
      ws.terminate();
      reject(err);
    };
    const onAbort = () => fail(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });

    ws.on("error", (err) => fail(toDialError(err, url)));
    ws.once("upgrade", (res) => {
      remoteAddress = res.socket.remoteAddress;
    });
    ws.once("unexpected-response", (_req, res) => {
      void readBody(res, MAX_ERROR_BODY_BYTES).then((body) => {
        const via = proxyRefused ? "proxy" : "server";
        fail(new HandshakeError({ status: res.statusCode ?? 0, body, headers: res.headers, via, url }));
      });
    });
    // The connection (and its message listener) must exist before ws can emit the first message.
    ws.once("open", () => {
      settled = true;
      signal.removeEventListener("abort", onAbort);
      resolve(new TransportConnection({ ws, httpVersion: "h1", remoteAddress, identity: undefined }));
    });
  });
}
