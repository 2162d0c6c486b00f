import { createHash, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { connect, upgrade, WebSocket } from "undici";
import { afterEach, describe, expect, test } from "vitest";
import { WebSocketServer } from "ws";
import { within } from "../../support/until.ts";
import { closed, deferred, type Rig, rigs, sha256Of } from "./harness.ts";

/** Reads exactly `n` bytes from a stream. */
async function readExactly(stream: Duplex, n: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let have = 0;
  while (have < n) {
    const chunk = stream.read(Math.min(n - have, stream.readableLength || 1)) as Buffer | null;
    if (chunk === null) {
      await within(new Promise((r) => stream.once("readable", r)), 5000, `${n - have} more bytes`);
      continue;
    }
    parts.push(chunk);
    have += chunk.length;
  }
  return Buffer.concat(parts);
}

/** After a 101 or 200-to-CONNECT, the server greets, then echoes every byte and ends when the client ends. */
function greetAndEcho(socket: Duplex, head: Buffer, statusLines: string): void {
  socket.on("error", () => {});
  socket.write(`${statusLines}\r\n\r\ngreeting`);
  if (head.length > 0) socket.unshift(head);
  socket.pipe(socket);
}

describe.each(rigs)("upgrades, %s", (_kind, makeRig) => {
  let rig: Rig | undefined;
  afterEach(async () => {
    await rig?.close();
    rig = undefined;
  });

  test("HTTP Upgrade (101) hands both sides the raw stream: bytes flow both ways", async () => {
    let upgradeReq: IncomingMessage | undefined;
    const server = createServer((_req, res) => res.end("not an upgrade"));
    server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      upgradeReq = req;
      greetAndEcho(
        socket,
        head,
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: SPDY/3.1\r\nConnection: Upgrade\r\nX-Stream-Protocol-Version: v4.channel.k8s.io",
      );
    });
    rig = await makeRig(server);

    const { headers, socket } = await upgrade(rig.url("/api/v1/namespaces/default/pods/p/exec?command=sh"), {
      method: "POST",
      protocol: "SPDY/3.1",
      headers: { "x-stream-protocol-version": "v4.channel.k8s.io" },
      dispatcher: rig.dispatcher,
    });
    expect(headers["x-stream-protocol-version"]).toBe("v4.channel.k8s.io");
    expect(upgradeReq?.headers.upgrade).toBe("SPDY/3.1");
    expect(upgradeReq?.method).toBe("POST");
    expect((await readExactly(socket, 8)).toString()).toBe("greeting");

    const data = randomBytes(1024 * 1024);
    const echoed = sha256Of(socket);
    socket.end(data);
    expect(await within(echoed, 10_000, "echo of 1 MiB")).toEqual({
      hex: createHash("sha256").update(data).digest("hex"),
      bytes: data.length,
    });
    await within(closed(socket), 5000, "upgraded stream closing");
  });

  test("CONNECT hands both sides the raw stream", async () => {
    const server = createServer();
    server.on("connect", (_req: IncomingMessage, socket: Duplex, head: Buffer) =>
      greetAndEcho(socket, head, "HTTP/1.1 200 Connection Established"),
    );
    rig = await makeRig(server);
    const { socket } = await connect(rig.url("/"), { dispatcher: rig.dispatcher });
    expect((await readExactly(socket, 8)).toString()).toBe("greeting");
    socket.write("ping");
    expect((await readExactly(socket, 4)).toString()).toBe("ping");
    socket.resume();
    socket.end();
    await within(closed(socket), 5000, "CONNECT stream closing");
  });

  test("a WebSocket (undici client, ws server) talks over the upgraded connection", async () => {
    const wss = new WebSocketServer({ noServer: true });
    const serverClosed = deferred<{ code: number; reason: string }>();
    wss.on("connection", (ws) => {
      ws.on("message", (data, isBinary) => ws.send(data, { binary: isBinary }));
      ws.on("close", (code, reason) => serverClosed.resolve({ code, reason: reason.toString() }));
    });
    const server = createServer();
    server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) =>
      wss.handleUpgrade(req, socket, head, (ws) => wss.emit("connection", ws, req)),
    );
    rig = await makeRig(server);

    const ws = new WebSocket(rig.url("/ws").replace(/^http/, "ws"), { dispatcher: rig.dispatcher });
    ws.binaryType = "arraybuffer";
    const messages: Array<string | ArrayBuffer> = [];
    const gotTwo = deferred();
    ws.addEventListener("message", (ev) => {
      messages.push(ev.data as string | ArrayBuffer);
      if (messages.length === 2) gotTwo.resolve();
    });
    await within(new Promise((r) => ws.addEventListener("open", r)), 5000, "websocket open");
    const blob = randomBytes(256 * 1024);
    ws.send("hello over the tunnel");
    ws.send(blob);
    await within(gotTwo.promise, 5000, "two echoed messages");
    expect(messages[0]).toBe("hello over the tunnel");
    expect(Buffer.from(messages[1] as ArrayBuffer).equals(blob)).toBe(true);

    const clientClosed = new Promise<{ wasClean: boolean }>((r) => ws.addEventListener("close", r));
    ws.close(1000, "done");
    expect(await within(serverClosed.promise, 5000, "server close")).toEqual({ code: 1000, reason: "done" });
    expect((await within(clientClosed, 5000, "client close")).wasClean).toBe(true);
    await within(Promise.all(rig.client.all.map(closed)), 5000, "websocket connection closing");
    wss.close();
  });
});
