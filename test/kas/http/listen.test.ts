import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { get as httpsGet } from "node:https";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenHttp } from "../../../cmd/kas/http/index.ts";
import { testPki } from "../../support/tls-certs.ts";

describe("listenHttp (the fronts' listener)", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "kas-listen-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const address = { host: "127.0.0.1", port: 0 };

  it("serves HTTPS from the configured certificate and key files", async () => {
    const pki = await testPki();
    const certificateFile = join(dir, "cert.pem");
    const keyFile = join(dir, "key.pem");
    await writeFile(certificateFile, pki.cert);
    await writeFile(keyFile, pki.key);
    const listener = await listenHttp({
      address,
      tls: { certificateFile, keyFile },
      handler: (_req, res) => res.end("secure"),
    });
    try {
      expect(listener.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
      const body = await new Promise<string>((resolve, reject) => {
        httpsGet(`${listener.url}/`, { ca: pki.caCert }, (res) => {
          let text = "";
          res.on("data", (c) => {
            text += c;
          });
          res.on("end", () => resolve(text));
        }).on("error", reject);
      });
      expect(body).toBe("secure");
    } finally {
      await listener.close(0);
    }
  });

  it("close: refuses new connections, lets a response in flight finish, then resolves", async () => {
    let finish: (() => void) | undefined;
    const listener = await listenHttp({
      address,
      handler: (_req, res) => {
        res.write("a");
        finish = () => res.end("b");
      },
    });
    const res = await fetch(listener.url);
    const reader = res.body!.getReader();
    expect(Buffer.from((await reader.read()).value!).toString()).toBe("a");
    const closed = listener.close(10_000);
    await expect(fetch(listener.url)).rejects.toThrow();
    finish!();
    expect(Buffer.from((await reader.read()).value!).toString()).toBe("b");
    await closed;
  });

  it("close: upgraded connections get the grace period, then are cut", async () => {
    const listener = await listenHttp({
      address,
      handler: (_req, res) => res.end(),
      onUpgrade: (_req, socket) =>
        socket.write("HTTP/1.1 101 Switching Protocols\r\nupgrade: x\r\nconnection: upgrade\r\n\r\n"),
    });
    const socket = connect(listener.port, "127.0.0.1");
    socket.on("error", () => {});
    await once(socket, "connect");
    socket.write("GET / HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: x\r\n\r\n");
    await once(socket, "data");
    const started = Date.now();
    await listener.close(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    if (!socket.closed) await once(socket, "close");
  });
});
