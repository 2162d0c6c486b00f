import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { fetch, request } from "undici";
import { afterEach, describe, expect, test } from "vitest";
import { within } from "../../support/until.ts";
import { generated, type Rig, rigs, sha256Of } from "./harness.ts";

const MiB = 1024 * 1024;

describe.each(rigs)("HTTP bodies, %s", (_kind, makeRig) => {
  let rig: Rig | undefined;
  afterEach(async () => {
    await rig?.close();
    rig = undefined;
  });

  test("fetch and request work, and keep-alive reuses connections", async () => {
    const seen: Array<{ method: string; url: string; remote: string | undefined }> = [];
    rig = await makeRig(
      createServer((req, res) => {
        seen.push({ method: req.method!, url: req.url!, remote: req.socket.remoteAddress });
        res.setHeader("content-type", "text/plain");
        res.end(`hello ${req.method} ${req.url}`);
      }),
    );
    for (let i = 0; i < 10; i++) {
      const r = await request(rig.url(`/b/${i}`), { method: "POST", body: "x", dispatcher: rig.dispatcher });
      expect(r.statusCode).toBe(200);
      expect(await r.body.text()).toBe(`hello POST /b/${i}`);
    }
    // Sequential requests reuse kept-alive connections (undici 7.30 opens a second one for the
    // request that follows the first, with or without the tunnel, then reuses both).
    expect(rig.client.all.length).toBeLessThanOrEqual(2);
    expect(rig.accepted.all).toHaveLength(rig.client.all.length);
    const r = await fetch(rig.url("/a?x=1"), { dispatcher: rig.dispatcher });
    expect(r.status).toBe(200);
    expect(await r.text()).toBe("hello GET /a?x=1");
    expect(seen).toHaveLength(11);
    expect(seen.every((s) => s.remote === "127.0.0.1")).toBe(true);
  });

  test("64 MiB chunked upload and download stream through with matching SHA-256", async () => {
    const size = 64 * MiB;
    let uploaded: { hex: string; bytes: number; chunked: boolean } | undefined;
    rig = await makeRig(
      createServer((req: IncomingMessage, res: ServerResponse) => {
        if (req.url === "/upload") {
          sha256Of(req).then(
            (got) => {
              uploaded = { ...got, chunked: req.headers["transfer-encoding"] === "chunked" };
              res.end(got.hex);
            },
            () => {},
          );
          return;
        }
        // A response without Content-Length goes out chunked.
        const { chunks } = generated(size, 7);
        pipeline(Readable.from(chunks), res).catch(() => {});
      }),
    );

    const up = generated(size, 3);
    const upRes = await request(rig.url("/upload"), {
      method: "POST",
      body: Readable.from(up.chunks),
      dispatcher: rig.dispatcher,
    });
    expect(await upRes.body.text()).toBe(await up.digest);
    expect(uploaded).toEqual({ hex: await up.digest, bytes: size, chunked: true });

    const down = await fetch(rig.url("/download"), { dispatcher: rig.dispatcher });
    expect(down.headers.get("transfer-encoding")).toBe("chunked");
    const got = await sha256Of(down.body!);
    const expected = generated(size, 7);
    for await (const _ of expected.chunks);
    expect(got).toEqual({ hex: await expected.digest, bytes: size });
  });

  test("request and response bodies stream: each side sees data before the other ends", async () => {
    rig = await makeRig(
      createServer((req, res) => {
        res.writeHead(200, { "content-type": "application/octet-stream" });
        res.flushHeaders();
        // Echo each chunk back as it arrives; the client only ends after hearing the echo.
        req.on("data", (chunk: Buffer) => res.write(chunk));
        req.on("end", () => res.end());
      }),
    );
    const words = ["one", "two", "three"];
    const body = new Readable({ read() {} });
    // undici sends the request head together with the first body chunk.
    body.push(words[0]);
    const res = await request(rig.url("/echo"), { method: "PUT", body, dispatcher: rig.dispatcher });
    const it = res.body[Symbol.asyncIterator]();
    for (const [i, word] of words.entries()) {
      if (i > 0) body.push(word);
      const { value } = await within(it.next(), 5000, `echo of ${word}`);
      expect(Buffer.from(value).toString()).toBe(word);
    }
    body.push(null);
    expect((await it.next()).done).toBe(true);
  });
});
