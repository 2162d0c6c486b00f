// Server-Sent Events of views events (WHATWG HTML "server-sent events"): `id:` per event (resumable
// with `Last-Event-ID`), `event:` its type, `data:` its JSON; a comment as heartbeat. A subscriber
// whose unsent bytes pass `maxBufferedBytes` is cut (never buffered without bound): it reconnects
// with its Last-Event-ID and gets what it missed, or a fresh snapshot.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../../../cmd/common/observability/index.ts";
import type { ViewEvent, ViewsHub } from "../views.ts";
import type { ClusterViewsMetrics } from "./metrics.ts";

export interface SseOptions {
  hub: ViewsHub;
  metrics: ClusterViewsMetrics;
  log: Logger;
  /** Period of heartbeat comments. */
  heartbeatMs: number;
  /** Unsent bytes a subscriber may have before it is cut. */
  maxBufferedBytes: number;
  /** The client's reconnection delay (`retry:`). */
  retryMs: number;
}

/** One event's frame, formatted once however many subscribers get it. */
const frames = new WeakMap<ViewEvent, string>();
export function sseFrame(event: ViewEvent): string {
  let frame = frames.get(event);
  if (frame === undefined) {
    // JSON has no raw newlines: one data line.
    frame = `id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
    frames.set(event, frame);
  }
  return frame;
}

/** Streams events matching `filter` until the client goes or kas cuts it; resolves then. */
export function serveEvents(
  req: IncomingMessage,
  res: ServerResponse,
  filter: { agentId?: string },
  o: SseOptions,
): Promise<void> {
  const header = req.headers["last-event-id"];
  const lastEventId = typeof header === "string" && header.length <= 64 ? header : undefined;
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
  });
  res.write(`retry: ${o.retryMs}\n\n`);
  return new Promise<void>((resolve) => {
    let ended = false;
    const end = (why?: string) => {
      if (ended) return;
      ended = true;
      clearInterval(heartbeat);
      unsubscribe();
      if (why !== undefined && !res.destroyed) res.end(`: ${why.replace(/\n/g, " ")}\n\n`);
      resolve();
    };
    const write = (text: string) => {
      if (ended) return;
      res.write(text);
      if (res.writableLength > o.maxBufferedBytes) {
        o.metrics.dropped.inc({ reason: "slow" });
        o.log.info({ buffered: res.writableLength }, "cut a views events subscriber that reads too slowly");
        end();
        res.destroy();
      }
    };
    const unsubscribe = o.hub.subscribe(
      { ...filter, ...(lastEventId !== undefined && { lastEventId }) },
      (event) => write(sseFrame(event)),
      (reason) => end(`dropped: ${reason}`),
    );
    const heartbeat = setInterval(() => write(": heartbeat\n\n"), o.heartbeatMs);
    res.once("close", () => end());
  });
}
