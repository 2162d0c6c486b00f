// The far end of the tunnel benchmark, run as its own process: a raw TCP server, a raw WebSocket
// server and a tunnel server, each echoing or sinking per connection. Prints its ports as JSON.
import { once } from "node:events";
import net from "node:net";
import type { Duplex } from "node:stream";
import { WebSocketServer } from "ws";
import { serveTunnels } from "../../lib/tunnel/session/index.ts";
import { HELLO_SIZE, MODE_ECHO, parseHello } from "./protocol.ts";

/** Serves one byte stream: reads the hello, then echoes or counts. */
function serveStream(s: Duplex): void {
  s.on("error", () => {});
  let head = Buffer.alloc(0);
  let sink: { expect: number; got: number } | undefined;
  const onData = (chunk: Buffer) => {
    if (sink) {
      sink.got += chunk.length;
      if (sink.got >= sink.expect) s.end(Buffer.from([1]));
      return;
    }
    head = Buffer.concat([head, chunk]);
    if (head.length < HELLO_SIZE) return;
    const { mode, expect } = parseHello(head);
    const rest = head.subarray(HELLO_SIZE);
    if (mode === MODE_ECHO) {
      s.off("data", onData);
      if (rest.length) s.write(rest);
      s.pipe(s);
      return;
    }
    sink = { expect, got: 0 };
    if (rest.length) onData(rest);
    else if (expect === 0) s.end(Buffer.from([1]));
  };
  s.on("data", onData);
}

const tcp = net.createServer((sock) => {
  sock.setNoDelay(true);
  serveStream(sock);
});
tcp.listen(0, "127.0.0.1");
await once(tcp, "listening");

const wss = new WebSocketServer({ host: "127.0.0.1", port: 0, maxPayload: 64 * 1024 * 1024 });
await once(wss, "listening");
wss.on("connection", (ws) => {
  let sink: { expect: number; got: number } | undefined;
  let mode = 0;
  ws.on("message", (data: Buffer) => {
    if (mode === 0) {
      const h = parseHello(data);
      mode = h.mode;
      sink = { expect: h.expect, got: 0 };
      return;
    }
    if (mode === MODE_ECHO) ws.send(data);
    else if (sink) {
      sink.got += data.length;
      if (sink.got >= sink.expect) ws.send(Buffer.from([1]));
    }
  });
});

const tunnels = await serveTunnels({
  host: "127.0.0.1",
  maxPayload: 64 * 1024 * 1024,
  onSession: (session) => session.on("stream", serveStream),
});

const port = (s: net.Server | WebSocketServer) => (s.address() as net.AddressInfo).port;
process.stdout.write(`${JSON.stringify({ tcp: port(tcp), ws: port(wss), tunnel: tunnels.url })}\n`);
process.stdin.resume();
process.stdin.on("end", () => process.exit(0));
