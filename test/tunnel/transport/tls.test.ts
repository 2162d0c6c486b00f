import { rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
import { describe, expect, onTestFinished, test } from "vitest";
import { dial, type TransportError } from "../../../lib/tunnel/transport/index.ts";
import { testPki } from "../../support/tls-certs.ts";
import { dialed, readBytes, startServer } from "./helpers.ts";

function failure(promise: Promise<unknown>): Promise<TransportError> {
  return promise.then(
    () => {
      throw new Error("unexpectedly succeeded");
    },
    (e: unknown) => e as TransportError,
  );
}

describe.each([false, true])("http2=%s", (http2) => {
  const variant = { tls: true, http2 };

  test("a certificate from an unknown CA is rejected with a TLS error", async () => {
    const server = await startServer(variant);
    const err = await failure(dial(server.url, { ...server.dialOptions, ca: undefined }));
    expect(err.code).toBe("TLS");
    expect(err.message).toMatch(/certificate/i);
    expect(server.listener.acceptor.connections.size).toBe(0);
  });

  test("the custom CA given as PEM is trusted", async () => {
    const server = await startServer(variant, { onConnection: (c) => c.stream.write(Buffer.from("ok")) });
    const client = await dialed(server.url, server.dialOptions);
    expect((await readBytes(client.stream, 2)).toString()).toBe("ok");
  });

  test("the custom CA given as a file path is trusted", async () => {
    const pki = await testPki();
    const caFile = join(tmpdir(), `tunnel-ca-${process.pid}-${Date.now()}.pem`);
    await writeFile(caFile, pki.caCert);
    onTestFinished(() => rm(caFile, { force: true }));
    const server = await startServer(variant);
    const client = await dialed(server.url, { ...server.dialOptions, ca: undefined, caFile });
    expect(client.httpVersion).toBe(http2 ? "h2" : "h1");
  });

  test("insecureSkipTlsVerify accepts the unknown certificate", async () => {
    const server = await startServer(variant);
    const client = await dialed(server.url, {
      ...server.dialOptions,
      ca: undefined,
      insecureSkipTlsVerify: true,
    });
    expect(client.httpVersion).toBe(http2 ? "h2" : "h1");
  });

  test("serverName is sent as SNI and checked against the certificate", async () => {
    const server = await startServer(variant);
    const sni: Array<string | false | null> = [];
    server.listener.server.on("secureConnection", (socket: TLSSocket) => sni.push(socket.servername));
    await dialed(server.url, { ...server.dialOptions, serverName: "tunnel.test" });
    expect(sni).toEqual(["tunnel.test"]);
    const err = await failure(dial(server.url, { ...server.dialOptions, serverName: "other.test" }));
    expect(err.code).toBe("TLS");
    expect(err.message).toContain("other.test");
  });
});

test("an unreadable caFile is reported with its path", async () => {
  const err = await failure(dial("wss://127.0.0.1:1/", { caFile: "/nonexistent/ca.pem", proxy: false }));
  expect(err.message).toContain("cannot read CA file /nonexistent/ca.pem");
});

test("ca that is not PEM is refused before dialing", async () => {
  await expect(dial("wss://127.0.0.1:1/", { ca: "not a certificate", proxy: false })).rejects.toThrow(/PEM/);
});
