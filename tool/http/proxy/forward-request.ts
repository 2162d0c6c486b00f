// The forwarder's plain requests: the request streams upstream, the response streams back; an
// error before the response's head is the proxy's own answer, after it the response is cut short.
import type * as http from "node:http";
import type { Readable } from "node:stream";
import type { Dispatcher } from "undici";
import { ClientGone } from "./client-gone.ts";
import { CLIENT_CLOSED, type ForwardContext, relayableHead } from "./forward-context.ts";
import { endToEnd } from "./hop-by-hop.ts";
import { hasBody, relayBody } from "./relay-body.ts";

/** The state of one request's response, as the metrics will count it. */
interface Answer {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  /** The status written (the upstream's, or the proxy's own); 0 before any. */
  status: number;
  /** Failed after its head was out. */
  failed: boolean;
}

export function forwardRequest(
  ctx: ForwardContext,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): void {
  const done = ctx.options.track?.();
  const answer: Answer = { req, res, status: 0, failed: false };
  res.once("close", () =>
    done?.(res.writableFinished ? answer.status : answer.failed ? "aborted" : CLIENT_CLOSED),
  );
  ctx.outgoing(req, false).then(
    ({ options, dispatcher }) => {
      if (dispatcher !== undefined) return viaUndici(ctx, answer, options, dispatcher);
      const up = ctx.client.request(options);
      up.on("error", (err) => {
        if (res.headersSent) return failMidway(ctx, answer, err);
        if (res.destroyed) return;
        upstreamFailed(ctx, answer, err);
      });
      up.on("response", (ur) => relayResponse(ctx, answer, ur, ur));
      // The client went away (or the stream was reset) before the response finished.
      res.once("close", () => {
        if (!res.writableFinished) up.destroy();
      });
      req.pipe(up);
    },
    (err: Error) => {
      if (res.destroyed) return;
      const [status, message] = ctx.prepareFailure(err, req);
      fail(ctx, answer, status, message);
    },
  );
}

/**
 * The same request through undici: what both clients share (hop-by-hop rule, headers, relay,
 * failures) is the same; the body streams upstream only when the request has one, as undici
 * would otherwise announce an empty chunked body on a GET.
 */
function viaUndici(
  ctx: ForwardContext,
  answer: Answer,
  options: http.RequestOptions,
  dispatcher: Dispatcher,
): void {
  const { req, res } = answer;
  // The client went away (or the stream was reset) before the response finished.
  const gone = new ClientGone(res);
  res.once("close", gone.onClose);
  dispatcher
    .request({
      origin: ctx.upstream.url.origin,
      path: options.path!,
      method: req.method as Dispatcher.HttpMethod,
      headers: options.headers as Record<string, string | string[]>,
      body: hasBody(req) ? req : null,
      signal: gone,
    })
    .then(
      (ur) => {
        if (res.destroyed) return void ur.body.destroy();
        const head = { statusCode: ur.statusCode, statusMessage: ur.statusText, headers: ur.headers };
        relayResponse(ctx, answer, head, ur.body);
      },
      (err: Error) => {
        if (!res.destroyed) upstreamFailed(ctx, answer, err);
      },
    );
}

/** No response from the upstream: 502. */
function upstreamFailed(ctx: ForwardContext, answer: Answer, err: Error): void {
  ctx.warn(err, answer.req, "upstream request failed");
  fail(ctx, answer, 502, `upstream ${ctx.upstream.url.host} failed: ${err.message}`);
}

/** A response's head, as node:http's client and undici both give it. */
type Head = Pick<http.IncomingMessage, "statusCode" | "statusMessage"> & {
  headers: http.IncomingHttpHeaders;
};

/** The upstream's response, head and body, to the client. */
function relayResponse(ctx: ForwardContext, answer: Answer, ur: Head, body: Readable): void {
  const { req, res } = answer;
  // An answer node:http's client reads but its server would refuse to write (a status
  // below 100, control characters in the reason) is the upstream's fault, not a crash.
  const head = relayableHead(ur);
  try {
    if (head === undefined) throw new Error(`invalid status line ${JSON.stringify(ur.statusCode)}`);
    answer.status = head.status;
    res.writeHead(answer.status, head.message, endToEnd(ur.headers));
  } catch (err) {
    body.destroy();
    ctx.warn(err as Error, req, "upstream answered with a response that cannot be relayed");
    fail(
      ctx,
      answer,
      502,
      `upstream ${ctx.upstream.url.host} answered with a response that cannot be relayed`,
    );
    return;
  }
  body.on("error", (err) => failMidway(ctx, answer, err)); // before the relay's own listener: counted as "aborted"
  // Failures are seen by failMidway above, or by the close listener (the client left).
  relayBody(body, res).catch(() => {});
}

/** Once the head is out, a failure can only cut the response short: the client sees a reset. */
function failMidway(ctx: ForwardContext, answer: Answer, err: Error): void {
  if (answer.res.destroyed) return; // the client went first, and its leaving caused this
  answer.failed = true;
  ctx.warn(err, answer.req, "upstream response failed midway; the response was cut short");
  answer.res.destroy();
}

/** The proxy's own answer, with the error body the options give. */
function fail(ctx: ForwardContext, answer: Answer, code: number, message: string): void {
  answer.status = code;
  const { contentType, body } = ctx.options.errorBody(code, message);
  answer.res
    .writeHead(code, { "content-type": contentType, "content-length": Buffer.byteLength(body) })
    .end(body);
}
