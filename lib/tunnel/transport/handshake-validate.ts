import type { IncomingHttpHeaders } from "node:http";
import type { HandshakeRequest } from "./handshake-request.ts";

/** An HTTP answer that refuses a handshake. */
export interface Refusal {
  status: number;
  message: string;
  headers?: Record<string, string>;
}

const KEY = /^[+/0-9A-Za-z]{22}==$/;

/** RFC 6455 section 4.2.1 checks for an HTTP/1.1 Upgrade request. */
export function validateH1(request: HandshakeRequest, subprotocol: string): Refusal | undefined {
  const h = request.headers;
  if (request.method !== "GET") {
    return { status: 405, message: `WebSocket handshake must use GET, not ${request.method}` };
  }
  if (h.upgrade?.toLowerCase() !== "websocket") {
    return {
      status: 426,
      message: `expected "Upgrade: websocket", got ${h.upgrade === undefined ? "no Upgrade header" : `"Upgrade: ${h.upgrade}"`}`,
      headers: { Upgrade: "websocket", Connection: "Upgrade" },
    };
  }
  const key = h["sec-websocket-key"];
  if (typeof key !== "string" || !KEY.test(key)) {
    return { status: 400, message: "missing or malformed Sec-WebSocket-Key header" };
  }
  return validateCommon(h, subprotocol);
}

/** RFC 8441 section 5 checks for an HTTP/2 extended CONNECT request. */
export function validateH2(
  request: HandshakeRequest,
  protocol: unknown,
  subprotocol: string,
): Refusal | undefined {
  if (protocol !== "websocket") {
    return { status: 400, message: `unsupported :protocol "${String(protocol)}"; expected "websocket"` };
  }
  return validateCommon(request.headers, subprotocol);
}

function validateCommon(h: IncomingHttpHeaders, subprotocol: string): Refusal | undefined {
  if (h["sec-websocket-version"] !== "13") {
    return {
      status: 426,
      message: `unsupported WebSocket version ${JSON.stringify(h["sec-websocket-version"] ?? null)}; expected 13`,
      headers: { "Sec-WebSocket-Version": "13" },
    };
  }
  const offered = parseSubprotocols(h["sec-websocket-protocol"]);
  if (!offered.includes(subprotocol)) {
    const got = offered.length === 0 ? "none" : offered.map((p) => JSON.stringify(p)).join(", ");
    return {
      status: 400,
      message: `unsupported WebSocket subprotocol (offered: ${got}); this endpoint requires "${subprotocol}"`,
    };
  }
  return undefined;
}

export function parseSubprotocols(header: string | undefined): string[] {
  if (header === undefined) return [];
  return header
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p.length > 0);
}
