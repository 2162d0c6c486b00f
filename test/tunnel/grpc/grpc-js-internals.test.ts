/**
 * Guards the one workaround that touches @grpc/grpc-js internals (lib/tunnel/grpc/grpc-js-internals.ts).
 * After a grpc-js upgrade, a failure here names the internal that moved.
 */
import { createRequire } from "node:module";
import { Duplex } from "node:stream";
import * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import {
  injectorServer,
  installStreamConnector,
  OPEN_STREAM_OPTION,
  streamConnectorInstalled,
} from "../../../lib/tunnel/grpc/grpc-js-internals.ts";
import { createGrpcStreamServer, createTunnelChannel } from "../../../lib/tunnel/grpc/index.ts";
import { sessionPair } from "../yamux/harness.ts";
import { type GenericClient, unary } from "./client-calls.ts";
import { TestClient, testServer } from "./test-service.ts";

const require = createRequire(import.meta.url);
const transport = require("@grpc/grpc-js/build/src/transport.js") as {
  Http2SubchannelConnector?: { prototype: Record<string, unknown> };
};

describe("grpc-js internals the tunnel channel relies on", () => {
  it("@grpc/grpc-js stays pinned to an exact version (upgrades are deliberate, with this suite run)", () => {
    const pkg = require("../../../package.json") as { dependencies: Record<string, string> };
    const spec = pkg.dependencies["@grpc/grpc-js"];
    expect(spec, "package.json must pin @grpc/grpc-js exactly (npm i -E)").toMatch(/^\d+\.\d+\.\d+$/);
    const installed = (require("@grpc/grpc-js/package.json") as { version: string }).version;
    expect(installed, "installed @grpc/grpc-js differs from package.json: run npm ci").toBe(spec);
  });

  it("the hook installs on Http2SubchannelConnector.prototype.tcpConnect", () => {
    installStreamConnector();
    expect(streamConnectorInstalled()).toBe(true);
  });

  it("fails loudly, naming the internal, when Http2SubchannelConnector.prototype.tcpConnect is gone", () => {
    const proto = transport.Http2SubchannelConnector?.prototype as Record<string, unknown>;
    const saved = Object.getOwnPropertyDescriptor(proto, "tcpConnect") as PropertyDescriptor;
    delete proto.tcpConnect;
    try {
      expect(() => installStreamConnector()).toThrow(
        /@grpc\/grpc-js \d+\.\d+\.\d+ internals moved: Http2SubchannelConnector\.prototype\.tcpConnect is not a function/,
      );
    } finally {
      Object.defineProperty(proto, "tcpConnect", saved);
    }
    expect(streamConnectorInstalled()).toBe(true);
  });

  it("a tunnel channel takes its connection from open(), never from a socket", async () => {
    const { server } = testServer();
    const streams = createGrpcStreamServer(server);
    const pair = await sessionPair();
    pair.server.on("stream", (s) => streams.inject(s));
    let opens = 0;
    const channel = createTunnelChannel(() => {
      opens++;
      return pair.client.open();
    });
    const client = new TestClient("x", grpc.credentials.createInsecure(), {
      channelOverride: channel,
    }) as GenericClient;
    try {
      const out = await unary(client, { text: "via hook" }, { deadlineMs: 5000 });
      expect(
        opens,
        `the channel did not call open(): grpc-js no longer connects through Http2SubchannelConnector.prototype.tcpConnect ` +
          `with the channel option "${OPEN_STREAM_OPTION}" (call ended ${grpc.status[out.code]}: ${out.details})`,
      ).toBe(1);
      expect(out.code).toBe(grpc.status.OK);
    } finally {
      client.close();
      await streams.close(0);
      server.forceShutdown();
      pair.close();
    }
  });

  it("channels without the option still connect over TCP", async () => {
    installStreamConnector();
    const { server } = testServer();
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    );
    const client = new TestClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as GenericClient;
    try {
      expect((await unary(client, { text: "tcp" }, { deadlineMs: 5000 })).code).toBe(grpc.status.OK);
    } finally {
      client.close();
      server.forceShutdown();
    }
  });

  it("createConnectionInjector's http2 server is found, and its session for a stream is made inside injectConnection", () => {
    const server = new grpc.Server();
    const { injector, http2Server } = injectorServer(server, grpc.ServerCredentials.createInsecure());
    const sessions: unknown[] = [];
    http2Server.on("session", (s) => sessions.push(s));
    const stream = new Duplex({ read() {}, write: (_c, _e, cb) => cb() });
    injector.injectConnection(stream);
    expect(
      sessions,
      "the shared stream server relies on the session event firing synchronously",
    ).toHaveLength(1);
    injector.destroy();
    stream.destroy();
    server.forceShutdown();
  });

  it("the name a session's socket gets as its address is the peer grpc-js reports (node:http2 wraps a plain stream)", () => {
    const server = new grpc.Server();
    const { injector, http2Server } = injectorServer(server, grpc.ServerCredentials.createInsecure());
    let address: unknown;
    http2Server.on("session", (s) => {
      (s.socket as unknown as { _peername: object })._peername = { address: "grpc-stream-1" };
      address = s.socket.remoteAddress;
    });
    const stream = new Duplex({ read() {}, write: (_c, _e, cb) => cb() });
    injector.injectConnection(stream);
    expect(address).toBe("grpc-stream-1");
    injector.destroy();
    stream.destroy();
    server.forceShutdown();
  });
});
