// WorkAbort: the signals held when it aborts are aborted, and so is every one acquired after; a
// controller exists only while some work holds a signal.
import { expect, test } from "vitest";
import { WorkAbort } from "../../../modules/runtime/index.ts";

test("abort reaches the signals held, with its reason, and those acquired later", () => {
  const work = new WorkAbort();
  const a = work.acquire();
  const b = work.acquire();
  expect(b).toBe(a); // one controller while work is in flight
  const reason = new Error("the stream ended");
  work.abort(reason);
  expect(a.aborted).toBe(true);
  expect(a.reason).toBe(reason);
  work.release();
  work.release();
  const later = work.acquire();
  expect(later.aborted).toBe(true);
  expect(later.reason).toBe(reason);
  expect(work.aborted).toBe(true);
  expect(work.reason).toBe(reason);
  work.release();
});

test("once every signal is released, the next work gets a new one; released ones are not aborted later", () => {
  const work = new WorkAbort();
  const first = work.acquire();
  work.release();
  const second = work.acquire();
  expect(second).not.toBe(first);
  work.abort("ended");
  expect(second.aborted).toBe(true);
  expect(first.aborted).toBe(false); // its work was over: nothing left to abort
  work.release();
});
