// Waiting in tests, with a deadline, on the real clock: captured when this module loads, so that
// tests which fake the timers (vi.useFakeTimers) can still wait for real I/O.
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;
const realSetImmediate = globalThis.setImmediate;
const realNow = Date.now;

/** Polls checked on every event-loop turn first (a frame just written), then every few ms (a slower process). */
const EAGER_TURNS = 200;
const POLL_MS = 5;

/** Resolves once `predicate` holds, or rejects after `ms` naming `what`. */
export async function until(
  predicate: () => boolean | Promise<boolean>,
  ms = 5000,
  what = "condition",
): Promise<void> {
  const deadline = realNow() + ms;
  for (let turn = 0; !(await predicate()); turn++) {
    if (realNow() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise<void>((resolve) =>
      turn < EAGER_TURNS ? realSetImmediate(resolve) : realSetTimeout(resolve, POLL_MS),
    );
  }
}

/** `promise`, or a rejection naming `what` if it has not settled within `ms`. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = realSetTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    realClearTimeout(timer);
  }
}
