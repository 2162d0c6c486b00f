// The observability listener (8151: metrics and probes), as kas runs it from connection_limits:
// silent, dribbling, unfinished and idle connections are closed by the server within short
// deadlines, and past the connection cap connections are refused.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type InProcessKas, startInProcessKas } from "../kas/support/in-process.ts";
import { checkConnectionCap, heldRequests, idleAfter } from "../support/held-connections.ts";

describe("observability (8151): held connections are closed", () => {
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
    port = Number(new URL(kas.addresses.observability).port);
  });
  afterAll(async () => {
    await kas?.close();
  });

  test("a silent connection, headers that never end and a body that never finishes get 408 and are closed", async () => {
    const answers = await heldRequests(port, "/metrics");
    expect(answers.silent).toMatch(/^HTTP\/1\.1 408 /);
    expect(answers.slowHeaders).toMatch(/^HTTP\/1\.1 408 /);
  });

  test("a keep-alive connection idle after its answer is closed", async () => {
    expect(await idleAfter(port, "GET /liveness HTTP/1.1\r\nHost: kas\r\n\r\n")).toMatch(/^HTTP\/1\.1 200 /);
  });

  test("connections past the cap are closed on arrival; under it again, a new one is served", async () => {
    await checkConnectionCap(port, 3, "GET /liveness HTTP/1.1\r\nHost: kas\r\n\r\n");
  });
});
