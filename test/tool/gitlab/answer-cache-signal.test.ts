// The answer cache's caller signal may be a function that makes it: called only when the caller
// has a wait to stop (a miss), never for an answer already cached; it stops that caller's wait only.
import { expect, test } from "vitest";
import { AnswerCache } from "../../../tool/gitlab/index.ts";

const refusal = (err: unknown) => ({ error: err as Error, definitive: true });

test("a cached answer never makes the signal; a miss makes it once, and its abort stops only that wait", async () => {
  const cache = new AnswerCache<string, Error>(refusal);
  let release!: (v: string) => void;
  const lookup = () =>
    new Promise<string>((resolve) => {
      release = resolve;
    });
  const controller = new AbortController();
  let made = 0;
  const signal = () => {
    made++;
    return controller.signal;
  };
  const waiting = cache.get("k", lookup, signal);
  const other = cache.get("k", lookup); // shares the lookup
  expect(made).toBe(1);
  controller.abort(new Error("client went away"));
  await expect(waiting).rejects.toThrow("client went away");
  release("answer");
  expect(await other).toBe("answer");
  let asked = 0;
  expect(
    await cache.get("k", lookup, () => {
      asked++;
      return controller.signal; // aborted: a cached answer does not care
    }),
  ).toBe("answer");
  expect(asked).toBe(0);
});
