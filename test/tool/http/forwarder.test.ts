// The reverse proxy behind both agentk modules, on plain TCP (the tunnel adds nothing it relies on):
// headers, bodies both ways, and what happens when either end goes away mid-stream.
import { once } from "node:events";
import {
  Agent,
  createServer,
  type IncomingMessage,
  request,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { Pool } from "undici";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { createForwarder, type Forwarder, type RequestOutcome } from "../../../tool/http/proxy/index.ts";
import { rawExchange } from "../../support/raw-http.ts";

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

async function listen(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** Which client the forwarder's plain requests go upstream with, per describe block below. */
let client: "node:http" | "undici" = "node:http";

/** upstream <- forwarder (on its own HTTP server) <- the test's requests. */
async function rig(upstream: (req: IncomingMessage, res: ServerResponse) => void) {
  const up = await listen(upstream);
  const statuses: RequestOutcome[] = [];
  const warnings: { obj: Record<string, unknown>; msg: string }[] = [];
  const agent = new Agent({ keepAlive: true });
  // Plain requests through undici when the upstream offers a dispatcher (agentk's Kubernetes one does).
  const dispatcher =
    client === "undici" ? new Pool(up.url, { headersTimeout: 0, bodyTimeout: 0 }) : undefined;
  const forwarder: Forwarder = createForwarder(
    {
      url: new URL(`${up.url}/base`),
      prepare: (h) => ({ agent, ...(dispatcher && { dispatcher }), headers: { ...h, "x-added": "yes" } }),
      destroy: () => {
        agent.destroy();
        dispatcher?.destroy();
      },
    },
    {
      errorBody: (code, message) => ({ contentType: "text/plain", body: `${code} ${message}` }),
      track: () => (status) => statuses.push(status),
      log: { warn: (obj, msg) => warnings.push({ obj: obj as Record<string, unknown>, msg }) },
    },
  );
  const front = await listen(forwarder.request);
  front.server.on("upgrade", forwarder.upgrade);
  return { up, front, statuses, warnings, forwarder };
}

function send(url: string, init: { method?: string; headers?: Record<string, string> } = {}) {
  const req = request(url, init);
  const response = once(req, "response", { signal: AbortSignal.timeout(10_000) }).then(
    ([r]) => r as IncomingMessage,
  );
  return { req, response };
}

async function text(res: IncomingMessage): Promise<string> {
  let body = "";
  for await (const chunk of res) body += chunk;
  return body;
}

describe.each(["node:http", "undici"] as const)("agentk's forwarder (plain requests through %s)", (via) => {
  beforeEach(() => {
    client = via;
  });

  test("path under the base, Host rewritten, hop-by-hop headers dropped, the module's headers added", async () => {
    let seen: IncomingMessage | undefined;
    const { up, front } = await rig((req, res) => {
      seen = req;
      res.setHeader("x-upstream", "1");
      res.end("ok");
    });
    const { req, response } = send(`${front.url}/api/v1/pods?watch=0`, {
      headers: { connection: "keep-alive, x-per-hop", "x-per-hop": "drop me", "x-end-to-end": "keep me" },
    });
    req.end();
    const res = await response;
    expect(await text(res)).toBe("ok");
    expect(res.headers["x-upstream"]).toBe("1");
    expect(seen?.url).toBe("/base/api/v1/pods?watch=0");
    expect(seen?.headers.host).toBe(new URL(up.url).host);
    expect(seen?.headers["x-per-hop"]).toBeUndefined();
    expect(seen?.headers["x-end-to-end"]).toBe("keep me");
    expect(seen?.headers["x-added"]).toBe("yes");
  });

  test("a path with dot segments or encoded separators never leaves the base: 400, the upstream sees nothing", async () => {
    let seen = 0;
    const { front, statuses } = await rig((_req, res) => {
      seen++;
      res.end("ok");
    });
    const port = Number(new URL(front.url).port);
    for (const target of ["/../other/x", "/a/%2e%2E/x", "/a/./b", "/a%2Fb", "/a%5cb", "/x/..", "/.."]) {
      for (const upgrade of ["", "connection: upgrade\r\nupgrade: websocket\r\n"]) {
        const answer = await rawExchange(port, `GET ${target} HTTP/1.1\r\nhost: x\r\n${upgrade}\r\n`);
        expect(answer.status, `${target} ${upgrade}`).toBe(400);
      }
    }
    expect(seen).toBe(0);
    expect(statuses.every((s) => s === 400)).toBe(true);
    const fine = await rawExchange(port, "GET /api/v1/pods?x=../y HTTP/1.1\r\nhost: x\r\n\r\n");
    expect(fine.status).toBe(200);
  });

  test("a request body streams upstream before it is complete; the response streams back", async () => {
    const { front, statuses } = await rig((req, res) => {
      res.writeHead(200);
      req.on("data", (chunk: Buffer) => res.write(`got ${chunk}`));
      req.on("end", () => res.end());
    });
    const { req, response } = send(`${front.url}/echo`, { method: "POST" });
    req.write("one");
    const res = await response;
    const [first] = await once(res, "data", { signal: AbortSignal.timeout(10_000) });
    expect(String(first)).toBe("got one");
    req.end("two");
    expect(await text(res)).toBe("got two");
    await expect.poll(() => statuses).toEqual([200]);
  });

  test("upstream unreachable: 502 from the proxy with the module's error body", async () => {
    const dead = await listen(() => {});
    const url = new URL(dead.url);
    dead.server.close();
    await once(dead.server, "close");
    const agent = new Agent();
    const forwarder = createForwarder(
      { url, prepare: (headers) => ({ agent, headers }), destroy: () => agent.destroy() },
      {
        errorBody: (code, message) => ({
          contentType: "application/json",
          body: JSON.stringify({ code, message }),
        }),
      },
    );
    const front = await listen(forwarder.request);
    const { req, response } = send(`${front.url}/x`);
    req.end();
    const res = await response;
    expect(res.statusCode).toBe(502);
    expect(JSON.parse(await text(res))).toMatchObject({
      code: 502,
      message: expect.stringContaining("ECONNREFUSED"),
    });
  });

  test("the upstream dies mid-response: the client's response fails, counted as aborted (not 200) and logged", async () => {
    const { up, front, statuses, warnings } = await rig((_req, res) => {
      res.writeHead(200);
      res.write("partial");
      setImmediate(() => res.socket?.destroy());
    });
    const { req, response } = send(`${front.url}/watch`);
    req.end();
    const res = await response;
    const outcome = await new Promise<string>((resolve) => {
      res.on("data", () => {});
      res.once("end", () => resolve(res.complete ? "complete" : "incomplete"));
      res.once("error", () => resolve("error"));
      res.once("aborted", () => resolve("aborted"));
    });
    expect(outcome).not.toBe("complete");
    await expect.poll(() => statuses).toEqual(["aborted"]);
    expect(warnings).toEqual([
      {
        obj: expect.objectContaining({ upstream: up.url, method: "GET", err: expect.any(Error) }),
        msg: "upstream response failed midway; the response was cut short",
      },
    ]);
  });

  test("the client goes away before the upstream answers: the upstream request is closed too; 499, nothing logged", async () => {
    let arrived!: () => void;
    const atUpstream = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    let upstreamClosed: Promise<unknown> | undefined;
    const { front, statuses, warnings } = await rig((_req, res) => {
      upstreamClosed = once(res, "close"); // never answers
      arrived();
    });
    const { req, response } = send(`${front.url}/slow`);
    response.catch(() => {}); // it never comes
    req.end();
    await atUpstream;
    req.destroy();
    await upstreamClosed;
    await expect.poll(() => statuses).toEqual([499]);
    expect(warnings).toEqual([]);
  });

  test("the client goes away mid-watch: the upstream request is closed too; 499, nothing logged", async () => {
    let upstreamClosed: Promise<unknown> | undefined;
    const { front, statuses, warnings } = await rig((req, res) => {
      res.writeHead(200);
      res.write("first event\n");
      upstreamClosed = once(res, "close");
      void req;
    });
    const { req, response } = send(`${front.url}/watch`);
    req.end();
    const res = await response;
    await once(res, "data", { signal: AbortSignal.timeout(10_000) });
    req.destroy();
    await upstreamClosed;
    await expect.poll(() => statuses).toEqual([499]);
    expect(warnings).toEqual([]);
  });
});
