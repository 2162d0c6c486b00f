// Connection ids: random positive int64s, so connections of one agent never share one in practice.
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { isConnectionId, newConnectionId } from "../../../../modules/agent_tracker/kas/connection-id.ts";

describe("connection ids", () => {
  test("any 8 random bytes give an id in [1, 2^63 - 1]; all-zero bits are drawn again", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 8, maxLength: 8 }), (bytes) => {
        const draws = [Buffer.from(bytes), Buffer.from([0x80, 0, 0, 0, 0, 0, 0, 1])];
        const id = newConnectionId(() => draws.shift()!);
        expect(isConnectionId(id)).toBe(true);
        expect(BigInt(id)).toBeGreaterThanOrEqual(1n);
        expect(BigInt(id)).toBeLessThan(2n ** 63n);
      }),
    );
    // The top bit is dropped (int64 stays positive); a zero is drawn again.
    const draws = [
      Buffer.alloc(8),
      Buffer.from([0x80, 0, 0, 0, 0, 0, 0, 0]),
      Buffer.from("ffffffffffffffff", "hex"),
    ];
    expect(newConnectionId(() => draws.shift()!)).toBe(String(2n ** 63n - 1n));
  });

  test("from the system's random source: distinct", () => {
    const ids = new Set(Array.from({ length: 10_000 }, () => newConnectionId()));
    expect(ids.size).toBe(10_000);
  });

  test("what is not an id", () => {
    for (const bad of ["0", "-1", "01", "9223372036854775808", "1.5", "", 5, null]) {
      expect(isConnectionId(bad)).toBe(false);
    }
    expect(isConnectionId("9223372036854775807")).toBe(true);
  });
});
