// relayBody, which both proxies stream every answer through: the head leaves with the first chunk
// (one write), or alone when the body is silent; either end failing tears down the other.
import { once } from "node:events";
import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { PassThrough } from "node:stream";
import { afterEach, expect, test } from "vitest";
import { relayBody } from "../../../tool/http/proxy/relay-body.ts";

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

/** A server whose handler gets each request's response; resolves with its URL. */
async function serve(handler: (res: ServerResponse) => void): Promise<string> {
  const server = createServer((_req, res) => handler(res));
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function get(url: string) {
  const req = request(url);
  req.end();
  const response = once(req, "response", { signal: AbortSignal.timeout(10_000) }).then(
    ([r]) => r as IncomingMessage,
  );
  return { req, response };
}

/**
 * Counts the writes `res`'s socket hands to the system from now on: node:http corks the socket
 * around a head and its first chunk, so together they are one `_writev`; a head flushed on its
 * own is a write of its own.
 */
function countWrites(res: ServerResponse): () => number {
  const socket = res.socket as Socket & Record<"_write" | "_writev", (...a: unknown[]) => void>;
  let writes = 0;
  for (const method of ["_write", "_writev"] as const) {
    const original = socket[method].bind(socket);
    socket[method] = (...a: unknown[]) => {
      writes++;
      original(...a);
    };
  }
  return () => writes;
}

test("a body that has data: the head leaves with the first chunk, in one write", async () => {
  let writes = () => 0;
  let relayed: Promise<void> | undefined;
  const url = await serve((res) => {
    writes = countWrites(res);
    res.writeHead(200, { "content-type": "text/plain", "content-length": "5" });
    const body = new PassThrough();
    body.end("hello");
    relayed = relayBody(body, res);
  });
  const { response } = get(url);
  const res = await response;
  let text = "";
  for await (const chunk of res) text += chunk;
  await relayed;
  expect(text).toBe("hello");
  expect(res.headers["content-type"]).toBe("text/plain");
  // Sent apart (flushHeaders before piping), the head is a write of its own: 2.
  expect(writes()).toBe(1);
});

test("a silent body (a watch with nothing to say): the client gets the head at once", async () => {
  const body = new PassThrough();
  const url = await serve((res) => {
    res.writeHead(200, { "content-type": "application/json" });
    void relayBody(body, res).catch(() => {});
  });
  const { req, response } = get(url);
  const res = await response; // within the 10 s deadline, while the body has said nothing
  expect(res.statusCode).toBe(200);
  body.write('{"type":"ADDED"}\n');
  const [chunk] = (await once(res, "data", { signal: AbortSignal.timeout(10_000) })) as [Buffer];
  expect(chunk.toString()).toBe('{"type":"ADDED"}\n');
  req.destroy();
});

test("the body fails midway: the client's response is cut and the relay rejects with the body's error", async () => {
  const body = new PassThrough();
  let relayed: Promise<void> | undefined;
  const url = await serve((res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    relayed = relayBody(body, res);
  });
  const { response } = get(url);
  const res = await response;
  const clientError = once(res, "error", { signal: AbortSignal.timeout(10_000) });
  body.write("partial");
  await once(res, "data", { signal: AbortSignal.timeout(10_000) });
  const failed = expect(relayed).rejects.toThrow("upstream broke");
  body.destroy(new Error("upstream broke"));
  await failed;
  const [err] = (await clientError) as [Error];
  expect(err.message).toBe("aborted");
  expect(res.complete).toBe(false);
});

test("the client leaves midway: the body is destroyed (its upstream released) and the relay rejects", async () => {
  const body = new PassThrough();
  let relayed: Promise<void> | undefined;
  const url = await serve((res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    relayed = relayBody(body, res);
  });
  const { req, response } = get(url);
  const res = await response;
  body.write("first");
  await once(res, "data", { signal: AbortSignal.timeout(10_000) });
  const closed = once(body, "close", { signal: AbortSignal.timeout(10_000) });
  req.destroy();
  await expect(relayed).rejects.toThrow("client closed");
  await closed;
  expect(body.destroyed).toBe(true);
});
