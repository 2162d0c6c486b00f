// A Server-Sent Events response (WHATWG HTML, "server-sent events"): `id`, `event`, `data` fields,
// comment heartbeats so proxies and browsers see a live connection, and a bound on what waits
// unsent: a client that reads too slowly is cut, never buffered for without limit.
import type { IncomingMessage, ServerResponse } from "node:http";

export interface EventStreamOptions {
  heartbeatMs: number;
  /** Bytes written but not yet taken by the client at most; beyond, the stream is cut. */
  maxBufferedBytes: number;
  /** Told once when the stream ends: the client left, it was too slow, or `close` was called. */
  onClose: (reason: string) => void;
}

export interface EventStream {
  /** Sends one event; false (and the stream is cut) when the client is too far behind. */
  send(event: { id?: string; event?: string; data: string }): boolean;
  close(reason: string): void;
  readonly closed: boolean;
}

export function openEventStream(
  req: IncomingMessage,
  res: ServerResponse,
  o: EventStreamOptions,
): EventStream {
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-store",
    "x-accel-buffering": "no",
  });
  res.flushHeaders();
  let closed = false;
  const heartbeat = setInterval(() => write(": heartbeat\n\n"), o.heartbeatMs);
  const end = (reason: string) => {
    if (closed) return;
    closed = true;
    clearInterval(heartbeat);
    res.end();
    o.onClose(reason);
  };
  req.once("close", () => end("client left"));
  const write = (text: string): boolean => {
    if (closed) return false;
    if (res.writableLength > o.maxBufferedBytes) {
      // Said in a comment first, for whoever reads the raw stream.
      res.write(": dropped: too slow\n\n");
      end("too slow");
      return false;
    }
    res.write(text);
    return true;
  };
  return {
    send: ({ id, event, data }) =>
      write(
        `${id !== undefined ? `id: ${oneLine(id)}\n` : ""}${event !== undefined ? `event: ${oneLine(event)}\n` : ""}` +
          `${data
            .split("\n")
            .map((line) => `data: ${line}\n`)
            .join("")}\n`,
      ),
    close: end,
    get closed() {
      return closed;
    },
  };
}

/** A field value may not hold a line break: it would end the field. */
function oneLine(value: string): string {
  return value.replace(/[\r\n]/g, " ");
}
