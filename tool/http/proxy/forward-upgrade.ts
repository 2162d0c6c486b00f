// The forwarder's Upgrade requests (exec, attach, port-forward): once the upstream says 101 the
// two connections become a raw byte splice; a refused upgrade's answer is relayed and closed.
import * as http from "node:http";
import type { Duplex } from "node:stream";
import { responseHead } from "../serve/raw-answer.ts";
import { CLIENT_CLOSED, type ForwardContext, type RequestOutcome, relayableHead } from "./forward-context.ts";
import { endToEnd } from "./hop-by-hop.ts";

/** Largest error body of a refused upgrade relayed to the client. */
const MAX_REFUSAL_BODY = 64 * 1024;

/** One upgrade's client side: its request, its socket, and how it ended (recorded once). */
interface Client {
  req: http.IncomingMessage;
  socket: Duplex;
  done(outcome: RequestOutcome): void;
}

export function forwardUpgrade(
  ctx: ForwardContext,
  req: http.IncomingMessage,
  socket: Duplex,
  head: Buffer,
): void {
  const track = ctx.options.track?.();
  let tracked = false;
  const client: Client = {
    req,
    socket,
    done: (outcome) => {
      if (!tracked) track?.(outcome);
      tracked = true;
    },
  };
  socket.on("error", () => socket.destroy());
  // Before an answer: the client left. After one: already recorded, so this does nothing.
  socket.once("close", () => client.done(CLIENT_CLOSED));
  ctx.outgoing(req, true).then(
    ({ options }) => {
      const up = ctx.client.request(options);
      socket.once("close", () => up.destroy());
      up.on("error", (err) => {
        if (socket.destroyed) return;
        ctx.warn(err, req, "upstream request failed");
        refuse(ctx, client, 502, `upstream ${ctx.upstream.url.host} failed: ${err.message}`);
      });
      up.on("upgrade", (ur, upSocket, upHead) => splice(ctx, client, head, ur, upSocket, upHead));
      // Upgrade refused (401, 403, 404, 400…): relay the answer and close.
      up.on("response", (ur) => relayRefusal(ctx, client, ur));
      up.end();
    },
    (err: Error) => {
      if (socket.destroyed) return;
      refuse(ctx, client, ...ctx.prepareFailure(err, req));
    },
  );
}

/** The proxy's own refusal, written raw on the socket. */
function refuse(ctx: ForwardContext, { socket, done }: Client, code: number, message: string): void {
  done(code);
  const { contentType, body } = ctx.options.errorBody(code, message);
  socket.end(
    responseHead(code, http.STATUS_CODES[code] ?? "", {
      "content-type": contentType,
      "content-length": String(Buffer.byteLength(body)),
    }) + body,
  );
}

/** The upstream said 101: relay it, then splice the two connections both ways. */
function splice(
  ctx: ForwardContext,
  { req, socket, done }: Client,
  head: Buffer,
  ur: http.IncomingMessage,
  upSocket: Duplex,
  upHead: Buffer,
): void {
  done(101);
  const headers = { ...ur.headers };
  socket.write(responseHead(101, relayableHead(ur)?.message ?? "Switching Protocols", headers));
  if (upHead.length > 0) socket.write(upHead);
  if (head.length > 0) upSocket.write(head);
  upSocket.on("error", (err) => {
    if (!socket.destroyed) ctx.warn(err, req, "upstream connection of an upgraded request failed");
    socket.destroy();
  });
  socket.on("error", () => upSocket.destroy());
  upSocket.once("close", () => socket.destroy());
  socket.once("close", () => upSocket.destroy());
  upSocket.pipe(socket);
  socket.pipe(upSocket);
}

/** The upstream refused the upgrade: its answer (body bounded) to the client, then close. */
function relayRefusal(ctx: ForwardContext, { req, socket, done }: Client, ur: http.IncomingMessage): void {
  const chunks: Buffer[] = [];
  let size = 0;
  ur.on("data", (c: Buffer) => {
    size += c.length;
    if (size <= MAX_REFUSAL_BODY) chunks.push(c);
  });
  ur.on("error", (err) => {
    if (socket.destroyed) return;
    done("aborted");
    ctx.warn(err, req, "upstream refusal of an upgrade failed midway");
    socket.destroy();
  });
  ur.once("end", () => {
    const body = Buffer.concat(chunks);
    const headers = {
      ...endToEnd(ur.headers),
      "content-length": String(body.length),
      connection: "close",
    };
    const head = relayableHead(ur) ?? { status: 502, message: "Bad Gateway" };
    done(head.status);
    socket.end(Buffer.concat([Buffer.from(responseHead(head.status, head.message, headers)), body]));
  });
}
