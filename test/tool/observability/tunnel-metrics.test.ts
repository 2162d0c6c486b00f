import { EventEmitter } from "node:events";
import { Registry } from "prom-client";
import { expect, test } from "vitest";
import type { TunnelSession } from "../../../lib/tunnel/index.ts";
import { TunnelMetrics } from "../../../tool/observability/metrics.ts";

/** What TunnelMetrics reads of a tunnel: its stats, and its close. */
class FakeTunnel extends EventEmitter {
  closed = false;
  readonly stats = { openStreams: 2, bytesIn: 1000, bytesOut: 3000 };
}

const value = async (registry: Registry, name: string) =>
  (await registry.getSingleMetric(name)!.get()).values[0]!.value;

test("a tunnel closing between two scrapes in one turn counts its bytes once, not in the live sums and the closed ones", async () => {
  const registry = new Registry();
  const metrics = new TunnelMetrics(registry, "t");
  const tunnel = new FakeTunnel();
  metrics.track(tunnel as unknown as TunnelSession<unknown>, "1");
  expect(await value(registry, "t_tunnel_received_bytes_total")).toBe(1000);
  expect(await value(registry, "t_tunnel_open_streams")).toBe(2);
  // No turn passes between the scrapes: only microtasks.
  tunnel.emit("close");
  expect(await value(registry, "t_tunnel_received_bytes_total")).toBe(1000);
  expect(await value(registry, "t_tunnel_sent_bytes_total")).toBe(3000);
  expect(await value(registry, "t_tunnel_open_streams")).toBe(0);
});
