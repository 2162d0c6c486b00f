// Views events as Server-Sent Events: `id:` per event (resumable with `Last-Event-ID`), `event:`
// its type, `data:` its JSON; heartbeats and the bound on unsent bytes are the shared event
// stream's (tool/http/serve/event-stream.ts). A subscriber cut for being slow reconnects with its
// Last-Event-ID and gets what it missed, or a fresh snapshot. GitLab's API and the dashboard both
// serve their event streams with `serveEvents`.
import type { IncomingMessage, ServerResponse } from "node:http";
import { type EventStream, eventFrame, openEventStream } from "../../../tool/http/serve/index.ts";
import type { ViewEvent, ViewsHub } from "../views.ts";

export interface SseOptions {
  hub: ViewsHub;
  /** Period of heartbeat comments. */
  heartbeatMs: number;
  /** Unsent bytes a subscriber may have before it is cut. */
  maxBufferedBytes: number;
  /** The client's reconnection delay (`retry:`). */
  retryMs?: number;
  /** Told of each stream as it opens (e.g. to end them all at shutdown). */
  onOpen?: (stream: EventStream) => void;
  /**
   * Told once of each stream's end, with why: "client left", "too slow", "dropped: <the hub's
   * reason>", or the reason given to its `close`.
   */
  onClose?: (reason: string, stream: EventStream) => void;
}

/** One event's frame, formatted once however many subscribers get it. */
const frames = new WeakMap<ViewEvent, string>();
export function sseFrame(event: ViewEvent): string {
  let frame = frames.get(event);
  if (frame === undefined) {
    frame = eventFrame({ id: event.id, event: event.type, data: JSON.stringify(event) });
    frames.set(event, frame);
  }
  return frame;
}

/** Streams events matching `filter` (and the request's Last-Event-ID) until the stream ends; resolves then. */
export function serveEvents(
  req: IncomingMessage,
  res: ServerResponse,
  filter: { agentId?: string },
  o: SseOptions,
): Promise<void> {
  const header = req.headers["last-event-id"];
  const lastEventId = typeof header === "string" && header !== "" && header.length <= 64 ? header : undefined;
  return new Promise<void>((resolve) => {
    let unsubscribe = () => {};
    const stream: EventStream = openEventStream(req, res, {
      heartbeatMs: o.heartbeatMs,
      maxBufferedBytes: o.maxBufferedBytes,
      ...(o.retryMs !== undefined && { retryMs: o.retryMs }),
      onClose: (reason) => {
        unsubscribe();
        o.onClose?.(reason, stream);
        resolve();
      },
    });
    o.onOpen?.(stream);
    unsubscribe = o.hub.subscribe(
      { ...filter, ...(lastEventId !== undefined && { lastEventId }) },
      (event) => stream.sendFrame(sseFrame(event)),
      (reason) => stream.close(`dropped: ${reason}`),
    );
    if (stream.closed) unsubscribe();
  });
}
