// When a tunnel is drained for its age: max_connection_age give or take 10 %, on a grid of
// AGE_SLOTS durations. The grid is for Node's timers: each distinct duration gets a timer list of
// its own, and the list of an unref'd timer cleared early (the agent left) stays until its
// duration would have passed. With one duration per tunnel (any millisecond), every agent that
// connected in the last two hours left a list behind (bench:scale --rounds: one per connection);
// on the grid, at most AGE_SLOTS + 1 lists exist, whatever the churn.
import { jittered } from "../../../lib/tunnel/index.ts";

/** Distinct durations the +-10 % spread is cut into. */
export const AGE_SLOTS = 200;

/** The age after which a tunnel is drained: `maxAgeMs` +-10 %, rounded to one of AGE_SLOTS + 1 durations. */
export function connectionAgeDelayMs(maxAgeMs: number, random: () => number = Math.random): number {
  const step = (maxAgeMs * 0.2) / AGE_SLOTS;
  const low = maxAgeMs * 0.9;
  return Math.round(low + Math.round((jittered(maxAgeMs, 0.1, random) - low) / step) * step);
}
