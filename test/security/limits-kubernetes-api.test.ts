// The Kubernetes API proxy (8154), as kas runs it from connection_limits: silent, dribbling,
// unfinished and idle connections (none of them with credentials) are closed by the server within
// short deadlines, and past the connection cap connections are refused.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type InProcessKas, startInProcessKas } from "../kas/support/in-process.ts";
import { checkConnectionCap, closedForLimit, heldRequests, idleAfter } from "../support/held-connections.ts";

describe("Kubernetes API proxy (8154): held connections are closed", () => {
  let kas: InProcessKas;
  let port: number;
  beforeAll(async () => {
    kas = await startInProcessKas((config) => {
      Object.assign(config.connectionLimits, {
        headerTimeoutMs: 300,
        bodyTimeoutMs: 300,
        idleTimeoutMs: 300,
        maxConnections: 3,
      });
    });
    port = Number(new URL(kas.addresses.kubernetesApi).port);
  });
  afterAll(async () => {
    await kas?.close();
  });

  test("a silent connection, headers that never end and a body that never finishes get 408 and are closed", async () => {
    const answers = await heldRequests(port, "/api/v1/namespaces/default/configmaps", {
      "content-type": "application/json",
    });
    expect(answers.silent).toMatch(/^HTTP\/1\.1 408 /);
    expect(answers.slowHeaders).toMatch(/^HTTP\/1\.1 408 /);
  });

  test("a keep-alive connection idle after its answer is closed", async () => {
    expect(await idleAfter(port, "GET /api HTTP/1.1\r\nHost: kas\r\n\r\n")).toMatch(/^HTTP\/1\.1 401 /);
  });

  test("connections past the cap are closed on arrival; under it again, a new one is served", async () => {
    await checkConnectionCap(port, 3, "GET /api HTTP/1.1\r\nHost: kas\r\n\r\n");
    // Counted where an operator sees floods (the log line is throttled).
    expect(
      await closedForLimit(kas.addresses.observability, "kubernetes_api", "max connections"),
    ).toBeGreaterThanOrEqual(1);
  });
});
