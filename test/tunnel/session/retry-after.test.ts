import { describe, expect, it } from "vitest";
import { HandshakeError, MAX_RETRY_AFTER_MS, retryAfterMs } from "../../../lib/tunnel/index.ts";

const refused = (headers: Record<string, string>, status = 429) =>
  new HandshakeError({ status, body: "over the limit", headers, url: "ws://kas/" });

describe("retryAfterMs: the wait a refused handshake asked for", () => {
  it("reads delay-seconds and HTTP-dates", () => {
    expect(retryAfterMs(refused({ "retry-after": "30" }))).toBe(30_000);
    expect(retryAfterMs(refused({ "retry-after": " 0 " }))).toBe(0);
    const now = Date.parse("Fri, 27 Nov 2026 06:00:00 GMT");
    expect(retryAfterMs(refused({ "retry-after": "Fri, 27 Nov 2026 06:00:45 GMT" }, 503), now)).toBe(45_000);
    expect(retryAfterMs(refused({ "retry-after": "Fri, 27 Nov 2026 05:00:00 GMT" }), now)).toBe(0);
  });

  it("caps what a server may ask, so no answer parks a client for good", () => {
    expect(retryAfterMs(refused({ "retry-after": "86400" }))).toBe(MAX_RETRY_AFTER_MS);
  });

  it("is undefined when nothing readable was asked, or the failure was not a refused handshake", () => {
    expect(retryAfterMs(refused({}))).toBeUndefined();
    expect(retryAfterMs(refused({ "retry-after": "soon" }))).toBeUndefined();
    expect(retryAfterMs(refused({ "retry-after": "-5" }))).toBeUndefined();
    expect(retryAfterMs(new Error("connection refused"))).toBeUndefined();
  });
});
