// Relaying a proxied response's body to the client: the two proxies (kas to the agent, agentk to
// the API server) stream every answer through here, so its per-request cost is on every hop.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Readable } from "node:stream";

/**
 * Pipes `body` into `res` (whose head is set, not yet sent) and settles once `res` has finished
 * (resolves) or either side failed (both are destroyed; rejects with the first error).
 *
 * The head goes out with the body's first chunk: one write, one TLS record or tunnel frame,
 * instead of two. When the body has nothing by the end of this turn of the event loop (a watch
 * may say nothing for minutes), the head goes alone, so the client sees it at once. Sending the
 * head apart on every response cost each hop of `kubectl get pods` through kas an extra write.
 *
 * Plain `pipe` rather than `stream.pipeline`: the latter makes an AbortController per call and
 * aborts it, with a DOMException and its stack trace, when done (~2 % of the proxy's CPU).
 */
export function relayBody(body: Readable, res: ServerResponse): Promise<void> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const fail = (err: Error) => {
      if (settled) return;
      settled = true;
      body.destroy();
      res.destroy();
      reject(err);
    };
    body.once("error", fail);
    res.once("error", fail);
    res.once("close", () => {
      if (!res.writableFinished)
        fail(new Error("the client closed the connection before the response was complete"));
    });
    res.once("finish", () => {
      settled = true;
      resolve();
    });
    let started = false;
    body.once("data", () => {
      started = true;
    });
    body.pipe(res);
    setImmediate(() => {
      if (!started && !res.writableEnded && !res.destroyed) res.flushHeaders();
    });
  });
}

/** Whether a request has a body to stream (undici would otherwise announce an empty chunked one on a GET). */
export function hasBody(req: IncomingMessage): boolean {
  return req.headers["transfer-encoding"] !== undefined || Number(req.headers["content-length"] ?? 0) > 0;
}
