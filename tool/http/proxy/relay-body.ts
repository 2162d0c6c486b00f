// Relaying a proxied response's body to the client: the two proxies (kas to the agent, agentk to
// the API server) stream every answer through here, so its per-request cost is on every hop.
import type { ServerResponse } from "node:http";
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
    // No named closures per call (tsx names each one, esbuild's keepNames): state in one object,
    // the listeners anonymous, the rest module functions.
    const relay: Relay = { body, res, reject, settled: false, started: false };
    body.once("error", (err: Error) => fail(relay, err));
    res.once("error", (err: Error) => fail(relay, err));
    res.once("close", () => {
      if (!res.writableFinished)
        fail(relay, new Error("the client closed the connection before the response was complete"));
    });
    res.once("finish", () => {
      relay.settled = true;
      resolve();
    });
    body.once("data", () => {
      relay.started = true;
    });
    body.pipe(res);
    setImmediate(flushIfQuiet, relay);
  });
}

interface Relay {
  body: Readable;
  res: ServerResponse;
  reject: (err: Error) => void;
  /** Finished or failed: later events change nothing. */
  settled: boolean;
  /** The body gave its first chunk (the head goes with it). */
  started: boolean;
}

/** The first failure destroys both ends and is the relay's. */
function fail(relay: Relay, err: Error): void {
  if (relay.settled) return;
  relay.settled = true;
  relay.body.destroy();
  relay.res.destroy();
  relay.reject(err);
}

/** Nothing from the body in this turn of the event loop: the head goes alone, now. */
function flushIfQuiet(relay: Relay): void {
  const { res } = relay;
  if (!relay.started && !res.writableEnded && !res.destroyed) res.flushHeaders();
}
