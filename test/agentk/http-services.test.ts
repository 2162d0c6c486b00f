// agentk's HTTP service streams: what becomes of a stream whose handler fails after it was accepted.
import { Agent } from "node:http";
import { Duplex } from "node:stream";
import { expect, test } from "vitest";
import { createHttpServiceStreams } from "../../cmd/agentk/http-services.ts";
import { createAgentkMetrics, createLogger } from "../../cmd/agentk/observability/index.ts";
import { encodeHeaderFrame, Kind } from "../../lib/tunnel/header/index.ts";
import { createForwarder } from "../../tool/http/proxy/index.ts";

test("a handler that fails on an accepted stream is logged with its service and counted", async () => {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger({
    level: "info",
    destination: { write: (l: string) => void lines.push(JSON.parse(l)) },
  });
  const metrics = createAgentkMetrics();
  const agent = new Agent();
  const forwarder = createForwarder(
    {
      url: new URL("http://127.0.0.1:1"),
      prepare: (headers) => ({ agent, headers }),
      destroy: () => agent.destroy(),
    },
    { errorBody: (_code, message) => ({ contentType: "text/plain", body: message }) },
  );
  const router = createHttpServiceStreams<undefined>({ log, metrics });
  router.add("prometheus", forwarder);
  // A stream that breaks as node:http's socket shim looks it over: the handler fails after the
  // stream was accepted.
  const stream = new Duplex({ read() {}, write: (_chunk, _encoding, done) => done() });
  Object.defineProperty(stream, "setTimeout", {
    get() {
      throw new Error("broken stream");
    },
  });
  stream.push(encodeHeaderFrame({ kind: Kind.KIND_HTTP, service: "prometheus" }));

  const result = await router.dispatcher.handle(stream, undefined);
  expect(result).toMatchObject({ accepted: true, handlerError: new Error("broken stream") });
  expect(stream.destroyed).toBe(true);
  expect(lines).toContainEqual(
    expect.objectContaining({
      level: 50,
      msg: "HTTP stream handler failed",
      service: "prometheus",
      err: expect.objectContaining({ message: "broken stream" }),
    }),
  );
  const counted = await metrics.streamHandlerErrors.get();
  expect(counted.values).toEqual([{ labels: { service: "prometheus" }, value: 1 }]);
  await router.close(0);
});
