// A request whose stream to the agent is lost before any answer (its tunnel, or the replica that
// forwarded it, went away) is sent again on a fresh stream when that is safe: idempotent and
// without a body. Real tunnel: a router with one agent whose HTTP streams a node:http server
// serves; the test cuts the streams it chooses as their request arrives.
import { once } from "node:events";
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Router } from "../../../lib/router/index.ts";
import {
  Kind,
  StreamDispatcher,
  serveHttp,
  TunnelClient,
  type TunnelServer,
} from "../../../lib/tunnel/index.ts";
import { AgentHttpProxy, describeProxyError } from "../../../tool/http/proxy/index.ts";
import { serveAgents } from "../../router/harness.ts";

const AGENT = "7";

describe("AgentHttpProxy: a stream lost before the answer", () => {
  let router: Router;
  let agents: TunnelServer<string>;
  let agent: TunnelClient;
  let front: Server;
  let proxy: AgentHttpProxy;
  /** How many of the next requests to arrive at the agent get their stream reset instead of an answer. */
  let cut = 0;
  let served = 0;
  /** Called with the agent's response to a request for /hold, which is never answered. */
  let held: ((res: ServerResponse) => void) | undefined;

  beforeAll(async () => {
    router = await new Router({}).start();
    agents = await serveAgents(router);
    const service = serveHttp((req, res) => {
      if (req.url === "/hold") {
        held?.(res); // never answered
        return;
      }
      if (cut > 0) {
        cut--;
        (req.socket as Duplex).destroy(); // the stream is reset: no answer at all
        return;
      }
      served++;
      req.resume();
      req.on("end", () => res.end(`${req.method} ok`));
    });
    const dispatcher = new StreamDispatcher().register(Kind.KIND_HTTP, (stream) => service.handle(stream));
    agent = new TunnelClient({
      url: agents.url,
      dial: { headers: { "x-agent-id": AGENT } },
      onStream: (stream) => void dispatcher.handle(stream, undefined),
    }).start();
    await agent.ready(5000);
    proxy = new AgentHttpProxy(router, { dialTimeoutMs: 2000 });
    front = createServer((req, res) => {
      proxy.forward({ agentId: AGENT, service: "svc" }, req, res, { path: req.url ?? "/" }).catch((err) => {
        const f = describeProxyError(err, AGENT);
        res.writeHead(f.status).end(f.message);
      });
    });
    front.listen(0, "127.0.0.1");
    await once(front, "listening");
  });
  afterAll(async () => {
    front?.close();
    await proxy?.destroy();
    await agent?.close(0);
    await agents?.close(0);
    await router?.close(0);
  });

  const call = (method: string, body?: string) =>
    fetch(`http://127.0.0.1:${(front.address() as AddressInfo).port}/x`, {
      method,
      ...(body !== undefined && { body }),
    });

  it("GET (idempotent, no body): sent again on a fresh stream and served", async () => {
    cut = 1;
    const before = served;
    const res = await call("GET");
    expect(await res.text()).toBe("GET ok");
    expect(res.status).toBe(200);
    expect(cut).toBe(0);
    expect(served).toBe(before + 1);
  });

  it("only once: a second loss is the answer, 502 naming it", async () => {
    cut = 2;
    const res = await call("DELETE");
    expect(res.status).toBe(502);
    expect(await res.text()).toMatch(/^error talking to agent 7: /);
    expect(cut).toBe(0);
  });

  it("POST (not idempotent) and PUT with a body are not sent twice", async () => {
    for (const [method, body] of [
      ["POST", undefined],
      ["PUT", "data"],
    ] as const) {
      cut = 1;
      const before = served;
      const res = await call(method, body);
      expect(res.status).toBe(502);
      expect(served).toBe(before);
      cut = 0;
    }
  });

  it("the client goes away before the agent answers: the agent's request is closed too", async () => {
    const atAgent = new Promise<ServerResponse>((resolve) => {
      held = resolve;
    });
    const client = new AbortController();
    const pending = fetch(`http://127.0.0.1:${(front.address() as AddressInfo).port}/hold`, {
      signal: client.signal,
    }).catch(() => "aborted");
    const res = await atAgent;
    const closed = once(res, "close");
    client.abort();
    expect(await pending).toBe("aborted");
    await closed; // without the abort, the stream stays open: the test times out
    expect(res.writableFinished).toBe(false);
  });
});
