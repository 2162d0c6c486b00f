// ClientGone, the "client went away" signal both proxies hand to undici instead of an
// AbortController's: it aborts the request when the client's response closes unfinished, with the
// reason an AbortController would give (or the one named), and never once the response finished.
import { once } from "node:events";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Pool } from "undici";
import { afterEach, expect, test } from "vitest";
import { ClientGone } from "../../../tool/http/proxy/client-gone.ts";

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** A client's response as the close listener sees it. */
const response = (writableFinished: boolean) => ({ writableFinished }) as unknown as ServerResponse;

test("an unfinished response's close aborts the undici request in flight, with AbortController's reason", async () => {
  let arrived!: () => void;
  const atUpstream = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  const server = createServer(() => arrived()); // never answers
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  cleanup.push(() => {
    server.closeAllConnections();
    server.close();
  });
  const pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  cleanup.push(() => pool.destroy());
  const gone = new ClientGone(response(false));
  const request = pool.request({ path: "/", method: "GET", signal: gone });
  await atUpstream;
  gone.onClose();
  const err = await request.catch((e: unknown) => e);
  expect(err).toBeInstanceOf(DOMException);
  expect(err).toMatchObject({ name: "AbortError", message: "This operation was aborted" });
  expect(gone.aborted).toBe(true);
});

test("a named reason; a finished response's close aborts nothing; aborted stays aborted", () => {
  const finished = new ClientGone(response(true), "client went away");
  finished.onClose();
  expect(finished.aborted).toBe(false);

  const gone = new ClientGone(response(false), "client went away");
  let heard = 0;
  gone.on("abort", () => heard++);
  gone.onClose();
  gone.onClose();
  expect(gone.aborted).toBe(true);
  expect(gone.reason).toEqual(new Error("client went away"));
  expect(heard).toBe(1);
});
