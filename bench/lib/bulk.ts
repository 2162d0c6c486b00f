// Bulk transfers toward a sink that speaks bench/tunnel/protocol.ts (bench/tunnel/server.ts): over
// any byte-stream Duplex (a TCP socket, a tunnel stream), and over a raw WebSocket, one message
// per write, no multiplexer. Each resolves once the sink has counted every byte.
import { once } from "node:events";
import type { Duplex } from "node:stream";
import { WebSocket } from "ws";
import { hello, MODE_SINK } from "../tunnel/protocol.ts";

const CHUNK = Buffer.alloc(64 * 1024, 0x5a);
/** WebSocket messages the raw client keeps in flight, awaiting their send callbacks. */
const WS_IN_FLIGHT = 16;
const MAX_PAYLOAD = 64 * 1024 * 1024;

export async function bulkDuplex(open: () => Promise<Duplex>, bytes: number): Promise<void> {
  const s = await open();
  const done = once(s, "data");
  s.write(hello(MODE_SINK, bytes));
  for (let sent = 0; sent < bytes; sent += CHUNK.length) {
    if (!s.write(CHUNK)) await once(s, "drain");
  }
  await done;
  s.destroy();
}

export async function openWs(url: string): Promise<WebSocket> {
  const ws = new WebSocket(url, { maxPayload: MAX_PAYLOAD });
  await once(ws, "open");
  return ws;
}

export async function bulkWs(url: string, bytes: number): Promise<void> {
  const ws = await openWs(url);
  const done = once(ws, "message");
  ws.send(hello(MODE_SINK, bytes));
  let inFlight = 0;
  let wake: (() => void) | undefined;
  for (let sent = 0; sent < bytes; sent += CHUNK.length) {
    // Backpressure as a careful ws user does it: bounded sends awaiting their callbacks.
    while (inFlight >= WS_IN_FLIGHT) await new Promise<void>((r) => (wake = r));
    inFlight++;
    ws.send(CHUNK, () => {
      inFlight--;
      wake?.();
    });
  }
  await done;
  ws.terminate();
}
