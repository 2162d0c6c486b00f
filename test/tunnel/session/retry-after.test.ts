import { describe, expect, it } from "vitest";
import {
  HandshakeError,
  MAX_RETRY_AFTER_MS,
  RETRY_SCHEDULED_HEADER,
  retryAfterMs,
  retryScheduled,
} from "../../../lib/tunnel/index.ts";

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

describe("retryScheduled: a place in a paced server's schedule", () => {
  it("only a refused handshake whose header says exactly 1", () => {
    expect(retryScheduled(refused({ "retry-after": "3", [RETRY_SCHEDULED_HEADER]: "1" }, 503))).toBe(true);
    for (const odd of ["0", "true", " 1", "1, 1", ""])
      expect(retryScheduled(refused({ "retry-after": "3", [RETRY_SCHEDULED_HEADER]: odd }, 503))).toBe(false);
    expect(retryScheduled(refused({ "retry-after": "3" }, 503))).toBe(false);
    expect(retryScheduled(new Error("connection refused"))).toBe(false);
  });
});
