// What a caller of Router.dial switches on: each error's class, code, name, message and fields.
import { expect, test } from "vitest";
import {
  NoTunnelError,
  PeerRejectedError,
  RegistryUnavailableError,
  RouterError,
} from "../../lib/router/index.ts";
import { CodedError } from "../../lib/tunnel/errors.ts";

test("NoTunnelError names the agent and the time waited (rounded), code NO_TUNNEL, cause kept", () => {
  const cause = new Error("deadline");
  const err = new NoTunnelError("42", 1234.6, { cause });
  expect(err).toBeInstanceOf(RouterError);
  expect(err).toBeInstanceOf(CodedError);
  expect(err.name).toBe("NoTunnelError");
  expect(err.code).toBe("NO_TUNNEL");
  expect(err.agentId).toBe("42");
  expect(err.message).toBe("no tunnel to agent 42 within 1235 ms");
  expect(err.cause).toBe(cause);
  expect(new NoTunnelError("7", 0).cause).toBeUndefined();
});

test("RegistryUnavailableError says the registry is unavailable and why, code REGISTRY_UNAVAILABLE", () => {
  const cause = new Error("ECONNREFUSED");
  const err = new RegistryUnavailableError("Redis connection is reconnecting", { cause });
  expect(err).toBeInstanceOf(RouterError);
  expect(err.name).toBe("RegistryUnavailableError");
  expect(err.code).toBe("REGISTRY_UNAVAILABLE");
  expect(err.message).toBe("tunnel registry unavailable: Redis connection is reconnecting");
  expect(err.cause).toBe(cause);
});

test("PeerRejectedError names the peer and the HTTP status, code PEER_REJECTED", () => {
  const cause = new Error("401");
  const err = new PeerRejectedError("wss://10.0.0.2:8155", 403, { cause });
  expect(err).toBeInstanceOf(RouterError);
  expect(err.name).toBe("PeerRejectedError");
  expect(err.code).toBe("PEER_REJECTED");
  expect(err.peerUrl).toBe("wss://10.0.0.2:8155");
  expect(err.status).toBe(403);
  expect(err.message).toBe("kas peer wss://10.0.0.2:8155 refused this replica's credentials (HTTP 403)");
  expect(err.cause).toBe(cause);
});

test("RouterError is named RouterError", () => {
  const err = new RouterError("NO_TUNNEL", "x");
  expect(err.name).toBe("RouterError");
  expect(err.code).toBe("NO_TUNNEL");
  expect(String(err)).toBe("RouterError: x");
});
