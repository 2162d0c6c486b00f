import { describe, expect, test } from "vitest";
import {
  dial,
  type HandshakeError,
  HandshakeRejection,
  type HandshakeRequest,
  type RejectedHandshake,
} from "../../../lib/tunnel/transport/index.ts";
import { within } from "../../support/until.ts";
import { dialed, startServer, VARIANTS } from "./helpers.ts";

async function dialError(url: string, options: Parameters<typeof dial>[1]): Promise<HandshakeError> {
  const err = await dial(url, options).then(
    () => {
      throw new Error("dial unexpectedly succeeded");
    },
    (e: unknown) => e,
  );
  return err as HandshakeError;
}

describe.each(VARIANTS)("$name", (variant) => {
  test.each([
    [401, "agent token expired"],
    [403, "agent is not allowed on this cluster"],
  ])(
    "authenticate refusing with %i: the dialer gets HandshakeError with status and message",
    async (status, message) => {
      const rejected: RejectedHandshake[] = [];
      const server = await startServer(variant, {
        authenticate: () => {
          throw new HandshakeRejection(status, message);
        },
        onReject: (r) => rejected.push(r),
      });
      const err = await dialError(server.url, server.dialOptions);
      expect(err.name).toBe("HandshakeError");
      expect(err.code).toBe("HANDSHAKE_REJECTED");
      expect(err.status).toBe(status);
      expect(err.via).toBe("server");
      expect(err.body).toContain(message);
      expect(err.message).toContain(`HTTP ${status}`);
      expect(err.message).toContain(message);
      expect(rejected).toMatchObject([{ status, message }]);
      expect(server.listener.acceptor.connections.size).toBe(0);
    },
  );

  test("authenticate sees the request and its value becomes the connection's identity", async () => {
    let seen: HandshakeRequest | undefined;
    const server = await startServer<{ agentId: number }>(variant, {
      path: "/agent/tunnel",
      authenticate: async (request) => {
        seen = request;
        await new Promise((resolve) => setImmediate(resolve));
        return { agentId: Number(request.query.get("id")) };
      },
    });
    const url = `${server.url.replace(/\/agent\/tunnel$/, "")}/agent/tunnel?id=42`;
    const client = await dialed(url, { ...server.dialOptions, headers: { Authorization: "Bearer s3cret" } });
    const peer = await server.accepted.next();
    expect(peer.identity).toEqual({ agentId: 42 });
    expect(client.identity).toBeUndefined();
    expect(seen).toMatchObject({
      httpVersion: variant.http2 ? "h2" : "h1",
      method: variant.http2 ? "CONNECT" : "GET",
      path: "/agent/tunnel?id=42",
      pathname: "/agent/tunnel",
      remoteAddress: "127.0.0.1",
      secure: variant.tls,
    });
    expect(seen?.headers.authorization).toBe("Bearer s3cret");
    expect(seen?.headers.host).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(seen?.headers["sec-websocket-protocol"]).toBe("gitlab-agent-tunnel.v1");
    expect(Object.keys(seen?.headers ?? {}).some((name) => name.startsWith(":"))).toBe(false);
  });

  test("a throwing hook gives 500 without leaking the error, and reports it", async () => {
    const rejected: RejectedHandshake[] = [];
    const server = await startServer(variant, {
      authenticate: () => {
        throw new Error("database password is hunter2");
      },
      onReject: (r) => rejected.push(r),
    });
    const err = await dialError(server.url, server.dialOptions);
    expect(err.status).toBe(500);
    expect(err.message).not.toContain("hunter2");
    expect(String(rejected[0]?.error)).toContain("hunter2");
  });

  test("a hook that hangs is cut off: 503 after the handshake timeout, and its signal aborts", async () => {
    let hookSignal: AbortSignal | undefined;
    const server = await startServer(variant, {
      handshakeTimeoutMs: 300,
      authenticate: (_request, { signal }) => {
        hookSignal = signal;
        return new Promise<never>(() => {});
      },
    });
    const started = Date.now();
    const err = await dialError(server.url, server.dialOptions);
    expect(err.status).toBe(503);
    expect(err.body).toContain("handshake timed out");
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(hookSignal?.aborted).toBe(true);
    expect(server.listener.acceptor.pendingHandshakes).toBe(0);
  });

  test("beyond maxPendingHandshakes the server answers 503; the waiting one still completes", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let entered!: () => void;
    const firstEntered = new Promise<void>((resolve) => {
      entered = resolve;
    });
    const server = await startServer(variant, {
      maxPendingHandshakes: 1,
      authenticate: async () => {
        entered();
        await gate;
      },
    });
    const first = dial(server.url, server.dialOptions);
    await within(firstEntered, 5000, "first handshake in authenticate");
    expect(server.listener.acceptor.pendingHandshakes).toBe(1);
    const err = await dialError(server.url, server.dialOptions);
    expect(err.status).toBe(503);
    expect(err.body).toContain("too many handshakes in progress (limit 1)");
    release();
    const connection = await first;
    connection.destroy();
  });
});
