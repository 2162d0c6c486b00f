// RefWatches on their own (a scripted repository, fake timers): one poll serves every stream that
// follows the same repository and ref; a failed poll is retried after 1 s, 2 s, 4 s … (capped at the
// period), a good one resets the back-off; only a changed commit is delivered.
import { Registry } from "prom-client";
import { afterEach, beforeEach, expect, test, vi } from "vitest";
import { createGitopsMetrics } from "../../../../modules/gitops/kas/metrics.ts";
import { type RefEvent, RefWatches } from "../../../../modules/gitops/kas/watches.ts";
import { RepositoryError, type RepositoryReader } from "../../../../modules/runtime/index.ts";
import { silentLogger } from "../../../kas/support/fixtures.ts";

const location = { backend: "local", path: "/repo" } as const;
let answers: Array<string | Error>;
let lookups: number;
let watches: RefWatches;
const repositories: RepositoryReader = {
  resolveRef: async () => {
    lookups++;
    const next = answers.length > 1 ? answers.shift()! : answers[0]!;
    if (next instanceof Error) throw next;
    return next;
  },
  readFile: async () => undefined,
  readFiles: async () => new Map(),
  listFiles: async () => [],
  close: async () => {},
};

beforeEach(() => {
  vi.useFakeTimers();
  lookups = 0;
  watches = new RefWatches({
    repositories,
    pollPeriodMs: 20_000,
    metrics: createGitopsMetrics(new Registry()),
    log: silentLogger(),
    random: () => 0.5, // no jitter
  });
});
afterEach(() => {
  watches.close();
  vi.useRealTimers();
});

const sub = (agentId: string, branch = "main") => ({
  location,
  ref: { branch },
  agentId,
  projectNames: ["group/p"],
});

test("two streams on one repository and ref: one lookup per poll, both hear the commit; another ref is its own watch", async () => {
  answers = ["c1"];
  const a: RefEvent[] = [];
  const b: RefEvent[] = [];
  watches.subscribe(sub("1"), (e) => a.push(e));
  watches.subscribe(sub("2"), (e) => b.push(e));
  await vi.advanceTimersByTimeAsync(0);
  expect(lookups).toBe(1);
  expect(a).toEqual([{ ok: true, commit: "c1" }]);
  expect(b).toEqual([{ ok: true, commit: "c1" }]);
  watches.subscribe(sub("3", "other"), () => {});
  await vi.advanceTimersByTimeAsync(0);
  expect(watches.size).toBe(2);
  // The period: one lookup each; an unchanged commit is delivered to nobody.
  await vi.advanceTimersByTimeAsync(20_000);
  expect(lookups).toBe(4);
  expect(a).toHaveLength(1);
  // A push polls at once.
  answers = ["c2"];
  expect(watches.pushed({ fullPath: "group/p" })).toBe(2);
  await vi.advanceTimersByTimeAsync(0);
  expect(a.at(-1)).toEqual({ ok: true, commit: "c2" });
});

test("failed polls are retried sooner, backing off; success resets to the period", async () => {
  const down = new RepositoryError("unavailable", "Gitaly is away");
  answers = [down, down, down, "c1"];
  const events: RefEvent[] = [];
  watches.subscribe(sub("1"), (e) => events.push(e));
  await vi.advanceTimersByTimeAsync(0);
  expect(lookups).toBe(1);
  await vi.advanceTimersByTimeAsync(999);
  expect(lookups).toBe(1);
  await vi.advanceTimersByTimeAsync(1); // 1 s after the first failure
  expect(lookups).toBe(2);
  await vi.advanceTimersByTimeAsync(2000); // 2 s after the second
  expect(lookups).toBe(3);
  await vi.advanceTimersByTimeAsync(4000); // 4 s after the third: it works
  expect(lookups).toBe(4);
  expect(events.map((e) => (e.ok ? e.commit : "error"))).toEqual(["error", "error", "error", "c1"]);
  await vi.advanceTimersByTimeAsync(19_999);
  expect(lookups).toBe(4); // the period again
  await vi.advanceTimersByTimeAsync(1);
  expect(lookups).toBe(5);
});
