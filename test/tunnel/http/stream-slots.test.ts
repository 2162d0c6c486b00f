import { expect, test } from "vitest";
import { StreamSlots } from "../../../lib/tunnel/http/stream-slots.ts";

const never = new AbortController().signal;

test("admits up to the cap, then queues until a slot is released", async () => {
  const slots = new StreamSlots(2);
  const a = await slots.acquire(never);
  await slots.acquire(never);
  expect(slots.used).toBe(2);
  let third = false;
  const pending = slots.acquire(never).then(() => {
    third = true;
  });
  await Promise.resolve();
  expect(third).toBe(false);
  a.release();
  a.release(); // twice is harmless
  await pending;
  expect(third).toBe(true);
  expect(slots.used).toBe(2);
});

test("a waiter gives up when its signal aborts, and leaves the queue", async () => {
  const slots = new StreamSlots(1);
  const held = await slots.acquire(never);
  const ac = new AbortController();
  const waiting = slots.acquire(ac.signal);
  ac.abort(new Error("gave up"));
  await expect(waiting).rejects.toThrow("gave up");
  held.release();
  expect(slots.used).toBe(0);
  await expect(slots.acquire(AbortSignal.abort(new Error("already")))).rejects.toThrow("already");
});

test("a waiter evicts the longest-idle slot, once; busy slots are never evicted", async () => {
  const slots = new StreamSlots(3);
  const held = await Promise.all([slots.acquire(never), slots.acquire(never), slots.acquire(never)]);
  const evicted: number[] = [];
  for (const [i, slot] of held.entries()) {
    slot.onEvict(() => {
      evicted.push(i);
    });
  }
  held[2]!.idle();
  held[1]!.idle();
  held[1]!.busy(); // back to work before anyone needed it
  const waiting = slots.acquire(never);
  expect(evicted).toEqual([2]);
  // A slot turning idle while the only waiter's eviction is under way is left alone.
  held[0]!.idle();
  expect(evicted).toEqual([2]);
  held[2]!.release();
  await waiting;
  // A new waiter takes the next idle one.
  const second = slots.acquire(never);
  expect(evicted).toEqual([2, 0]);
  held[0]!.release();
  await second;
  expect(slots.used).toBe(3);
});

test("a slot turning idle is evicted at once when someone is waiting", async () => {
  const slots = new StreamSlots(1);
  const held = await slots.acquire(never);
  let evicted = false;
  held.onEvict(() => {
    evicted = true;
    held.release();
  });
  const waiting = slots.acquire(never);
  expect(evicted).toBe(false);
  held.idle();
  expect(evicted).toBe(true);
  await waiting;
});

test("rejects a cap that is not a positive integer", () => {
  expect(() => new StreamSlots(0)).toThrow(RangeError);
  expect(() => new StreamSlots(1.5)).toThrow(RangeError);
});
