// A Server-Sent Events response (WHATWG HTML, "server-sent events"): `id`, `event`, `data` fields,
// comment heartbeats so proxies and browsers see a live connection, and a bound on what waits
// unsent: a client that reads too slowly is cut, never buffered for without limit.
import type { IncomingMessage, ServerResponse } from "node:http";

export interface EventStreamOptions {
  heartbeatMs: number;
  /** Bytes written but not yet taken by the client at most; beyond, the stream is cut. */
  maxBufferedBytes: number;
  /** The client's reconnection delay (`retry:`), sent first when given. */
  retryMs?: number;
  /**
   * Told once when the stream ends, with why: "client left", "too slow" (past `maxBufferedBytes`),
   * or the reason given to `close`.
   */
  onClose: (reason: string) => void;
}

export interface EventStream {
  /** Sends one event; false (and the stream is cut) when the client is too far behind. */
  send(event: { id?: string; event?: string; data: string }): boolean;
  /** Sends an event already formatted by {@link eventFrame} (one text for many streams). */
  sendFrame(frame: string): boolean;
  /** Ends the stream, saying `reason` in a comment. */
  close(reason: string): void;
  readonly closed: boolean;
}

/** One event's text on the wire. */
export function eventFrame({ id, event, data }: { id?: string; event?: string; data: string }): string {
  return (
    `${id !== undefined ? `id: ${oneLine(id)}\n` : ""}${event !== undefined ? `event: ${oneLine(event)}\n` : ""}` +
    `${data
      .split("\n")
      .map((line) => `data: ${line}\n`)
      .join("")}\n`
  );
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
  if (o.retryMs !== undefined) res.write(`retry: ${o.retryMs}\n\n`);
  else res.flushHeaders();
  let closed = false;
  const heartbeat = setInterval(() => write(": heartbeat\n\n"), o.heartbeatMs);
  const end = (reason: string, comment?: string) => {
    if (closed) return;
    closed = true;
    clearInterval(heartbeat);
    // Said in a comment, for whoever reads the raw stream.
    if (comment !== undefined && !res.destroyed) res.end(`: ${oneLine(comment)}\n\n`);
    else res.end();
    o.onClose(reason);
  };
  req.once("close", () => end("client left"));
  const write = (text: string): boolean => {
    if (closed) return false;
    if (res.writableLength > o.maxBufferedBytes) {
      // What waits unsent would never reach it in time: let go of it all now.
      end("too slow");
      res.destroy();
      return false;
    }
    res.write(text);
    return true;
  };
  return {
    send: (event) => write(eventFrame(event)),
    sendFrame: write,
    close: (reason) => end(reason, reason),
    get closed() {
      return closed;
    },
  };
}

/** A field value may not hold a line break: it would end the field. */
function oneLine(value: string): string {
  return value.replace(/[\r\n]/g, " ");
}
