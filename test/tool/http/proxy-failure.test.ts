import { errors as undiciErrors } from "undici";
import { describe, expect, it } from "vitest";
import { NoTunnelError, PeerRejectedError, RegistryUnavailableError } from "../../../lib/router/index.ts";
import { HeaderError, RejectCode, StreamRejectedError } from "../../../lib/tunnel/index.ts";
import { describeProxyError } from "../../../tool/http/proxy/index.ts";

describe("describeProxyError: why a request could not reach the agent -> status", () => {
  const cases: Array<[string, unknown, number, string]> = [
    ["no tunnel by the deadline", new NoTunnelError("42", 5000), 503, "ServiceUnavailable"],
    ["Redis down", new RegistryUnavailableError("Redis connection is end"), 503, "ServiceUnavailable"],
    ["a peer refused us", new PeerRejectedError("ws://b", 401), 503, "ServiceUnavailable"],
    ["not allow-listed", new StreamRejectedError(RejectCode.REJECT_CODE_NOT_FOUND, "nope"), 404, "NotFound"],
    [
      "permission denied",
      new StreamRejectedError(RejectCode.REJECT_CODE_PERMISSION_DENIED, "no"),
      403,
      "Forbidden",
    ],
    [
      "agent draining",
      new StreamRejectedError(RejectCode.REJECT_CODE_UNAVAILABLE, "busy"),
      503,
      "ServiceUnavailable",
    ],
    [
      "agent deadline",
      new StreamRejectedError(RejectCode.REJECT_CODE_DEADLINE_EXCEEDED, "late"),
      504,
      "Timeout",
    ],
    ["unknown kind", new StreamRejectedError(RejectCode.REJECT_CODE_UNKNOWN_KIND, "what"), 502, "BadGateway"],
    ["no verdict in time", new HeaderError("TIMEOUT", "t"), 504, "Timeout"],
    ["no response headers in time", new undiciErrors.HeadersTimeoutError(), 504, "Timeout"],
    ["the stream broke", new Error("socket hang up"), 502, "BadGateway"],
  ];
  it.each(cases)("%s", (_name, err, status, reason) => {
    const f = describeProxyError(err, "42");
    expect(f.status).toBe(status);
    expect(f.reason).toBe(reason);
  });

  it("passes the agent's reason through for refusals, and names the agent otherwise", () => {
    const refused = new StreamRejectedError(
      RejectCode.REJECT_CODE_NOT_FOUND,
      'service "x" is not allow-listed',
    );
    expect(describeProxyError(refused, "42").message).toBe('service "x" is not allow-listed');
    expect(describeProxyError(new NoTunnelError("42", 10), "42").message).toMatch(
      /^agent 42 is not connected/,
    );
  });
});
