// Connections a client holds open against a listener, for the tests of its limits: silent ones,
// headers that never end, bodies that never finish, idle keep-alive and HTTP/2 connections. The
// tests never close them themselves: a 'close' within the deadline is the server's doing.
import { once } from "node:events";
import * as http2 from "node:http2";
import { connect, type Socket } from "node:net";
import { until, within } from "./until.ts";

/**
 * A TCP connection to 127.0.0.1:`port`, connected, reading (a paused socket would never see the
 * server's FIN, so never 'close'). Resets are how some limits close: no error escapes.
 */
export async function openConnection(port: number): Promise<Socket> {
  const socket = connect(port, "127.0.0.1");
  socket.on("error", () => {});
  socket.resume();
  await within(once(socket, "connect"), 5000, `a connection to port ${port}`);
  return socket;
}

/** What the server sent on `socket` until now (a 408, a response…). */
export function received(socket: Socket): () => string {
  let data = "";
  socket.on("data", (chunk: Buffer) => {
    data += chunk.toString("latin1");
  });
  return () => data;
}

/** Resolves once `closable` has closed; rejects naming `what` after `ms`. */
export async function closedWithin(
  closable: { closed?: boolean; destroyed?: boolean; once(event: "close", listener: () => void): unknown },
  ms: number,
  what: string,
): Promise<void> {
  if (closable.closed || closable.destroyed) return;
  await within(
    new Promise<void>((resolve) => closable.once("close", resolve)),
    ms,
    `the server to close ${what}`,
  );
}

/** Starts a request whose headers never end: one more header line every `everyMs` until the connection closes. */
export function dribbleHeaders(socket: Socket, everyMs: number): void {
  socket.write("GET / HTTP/1.1\r\nHost: kas\r\n");
  let n = 0;
  const timer = setInterval(() => socket.write(`X-Slow-${n++}: still coming\r\n`), everyMs);
  socket.once("close", () => clearInterval(timer));
}

/** Sends a request's headers and the start of a body that never finishes (100 bytes announced, 5 sent). */
export function unfinishedBody(socket: Socket, path: string, headers: Record<string, string> = {}): void {
  const lines = Object.entries({ host: "kas", "content-length": "100", ...headers }).map(
    ([k, v]) => `${k}: ${v}`,
  );
  socket.write(`POST ${path} HTTP/1.1\r\n${lines.join("\r\n")}\r\n\r\ntoken`);
}

/** Sends a whole request on `socket` and resolves with the response head once it is in (the connection stays). */
export async function exchange(socket: Socket, request: string): Promise<string> {
  let head = "";
  const done = new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      head += chunk.toString("latin1");
      if (!head.includes("\r\n\r\n")) return;
      socket.off("data", onData);
      resolve(head.slice(0, head.indexOf("\r\n\r\n")));
    };
    socket.on("data", onData);
    socket.once("close", () => reject(new Error(`closed before an answer; got ${JSON.stringify(head)}`)));
  });
  socket.write(request);
  return within(done, 5000, "an answer");
}

/** A cleartext HTTP/2 connection (prior knowledge, as gRPC clients speak it), once the server's settings are in. */
export async function openH2c(url: string): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(url);
  session.on("error", () => {});
  await within(once(session, "remoteSettings"), 5000, `HTTP/2 settings from ${url}`);
  return session;
}

/** A request on `session`, ended with `body`; resolves with the response headers and trailers once it is over. */
export async function h2Exchange(
  session: http2.ClientHttp2Session,
  headers: http2.OutgoingHttpHeaders,
  body?: Buffer,
): Promise<{ headers: http2.IncomingHttpHeaders; trailers: http2.IncomingHttpHeaders }> {
  const stream = session.request(headers);
  stream.on("error", () => {});
  let trailers: http2.IncomingHttpHeaders = {};
  stream.on("trailers", (t) => {
    trailers = t;
  });
  stream.end(body);
  const [response] = (await within(once(stream, "response"), 5000, "an HTTP/2 response")) as [
    http2.IncomingHttpHeaders,
  ];
  stream.resume();
  await within(once(stream, "close"), 5000, "the HTTP/2 stream to end");
  return { headers: response, trailers };
}

/** gRPC's framing of an empty message: not compressed, length 0. */
export const EMPTY_GRPC_MESSAGE = Buffer.alloc(5);

/**
 * The connection cap of the listener on `port`, `cap`: that many connections are served (each
 * answers `request`, so the server has counted it), the next is closed on arrival without a
 * word, and once one of the held ones is gone a new connection is served again (a count, not a
 * ban). Throws saying which step failed; closes what it opened.
 */
export async function checkConnectionCap(port: number, cap: number, request: string): Promise<void> {
  const held: Socket[] = [];
  try {
    for (let i = 0; i < cap; i++) {
      const socket = await openConnection(port);
      held.push(socket);
      await exchange(socket, request);
    }
    const extra = await openConnection(port);
    held.push(extra);
    const got = received(extra);
    await closedWithin(extra, 3000, "a connection past the cap");
    if (got() !== "") throw new Error(`a connection past the cap was answered: ${JSON.stringify(got())}`);
    held[0]!.destroy();
    await until(
      async () => {
        const next = await openConnection(port);
        held.push(next);
        return exchange(next, request).then(
          () => true,
          () => false,
        );
      },
      5000,
      "a connection under the cap to be served",
    );
  } finally {
    for (const socket of held) socket.destroy();
  }
}

/** How long the tests give a server to close a held connection: well past their short deadlines, far below production ones. */
export const CLOSE_MS = 3000;

/**
 * Holds three requests open on `port`: a silent connection, headers dribbled forever, and a
 * request to `bodyPath` whose body never finishes. Resolves, once the server closed all three
 * (within {@link CLOSE_MS}), with what each was answered.
 */
export async function heldRequests(
  port: number,
  bodyPath: string,
  bodyHeaders: Record<string, string> = {},
): Promise<{ silent: string; slowHeaders: string; slowBody: string }> {
  const [silent, slowHeaders, slowBody] = await Promise.all([1, 2, 3].map(() => openConnection(port)));
  const answers = [silent!, slowHeaders!, slowBody!].map(received);
  dribbleHeaders(slowHeaders!, 50);
  unfinishedBody(slowBody!, bodyPath, bodyHeaders);
  await Promise.all([
    closedWithin(silent!, CLOSE_MS, "a silent connection"),
    closedWithin(slowHeaders!, CLOSE_MS, "a connection dribbling headers"),
    closedWithin(slowBody!, CLOSE_MS, "a connection whose body never finishes"),
  ]);
  return { silent: answers[0]!(), slowHeaders: answers[1]!(), slowBody: answers[2]!() };
}

/** Sends `request` on a new connection and resolves with the answer's head once the server has closed it, idle. */
export async function idleAfter(port: number, request: string): Promise<string> {
  const socket = await openConnection(port);
  const head = await exchange(socket, request);
  await closedWithin(socket, CLOSE_MS, "a keep-alive connection idle after its answer");
  return head;
}

/** What kas's metrics (at `observabilityUrl`) count of connections `front` closed for `limit`. */
export async function closedForLimit(
  observabilityUrl: string,
  front: string,
  limit: string,
): Promise<number> {
  const text = await (await fetch(`${observabilityUrl}/metrics`)).text();
  const series = `kas_connections_closed_for_limit_total{front="${front}",limit="${limit}"} `;
  const line = text.split("\n").find((l) => l.startsWith(series));
  return line === undefined ? 0 : Number(line.slice(series.length));
}
