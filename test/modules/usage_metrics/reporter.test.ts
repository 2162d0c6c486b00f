// The usage tracker and its reporter on their own: counts summed, subtracted only once GitLab took
// them, what was counted while a report was on the wire kept, unique counters bounded, one report
// at a time; checked for any interleaving of counting and GitLab answering (fast-check).
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { type UsageData, UsageTracker } from "../../../modules/runtime/index.ts";
import { type ReportResult, UsageReporter } from "../../../modules/usage_metrics/kas/reporter.ts";
import { silentLogger } from "../../kas/support/fixtures.ts";

/** A reporter over `tracker` whose POSTs wait for the test to answer them. */
function harness(tracker: UsageTracker) {
  const results: ReportResult[] = [];
  const pending: { data: UsageData; answer: (ok: boolean | number) => void; answered?: boolean }[] = [];
  const reporter = new UsageReporter({
    source: tracker,
    periodMs: 3_600_000,
    log: silentLogger(),
    reports: { inc: ({ result }) => results.push(result) },
    send: (data) =>
      new Promise<void>((resolve, reject) => {
        pending.push({
          // Copied: what went on the wire, whatever the tracker does next.
          data: structuredClone(data),
          answer: (ok) =>
            ok === true
              ? resolve()
              : reject(Object.assign(new Error("GitLab failed"), { status: ok === false ? 500 : ok })),
        });
      }),
  });
  return { reporter, results, pending };
}

const signal = new AbortController().signal;
const flush = () => new Promise((r) => setImmediate(r));

describe("UsageTracker", () => {
  test("only non-zero counters and non-empty unique counters are collected; nothing: undefined", () => {
    const t = new UsageTracker();
    const a = t.counter("a");
    t.counter("b");
    const u = t.uniqueCounter("u");
    t.uniqueCounter("v");
    expect(t.collect()).toBeUndefined();
    a.inc();
    a.inc(2);
    u.add("7");
    u.add("7");
    u.add("not-an-id");
    u.add("0");
    expect(t.collect()).toEqual({ counters: { a: 3 }, uniqueCounters: { u: ["7"] } });
    expect(() => t.counter("u")).toThrow(/registered already/);
  });

  test("a unique counter holds at most maxUniqueIds; the rest are dropped and said so", () => {
    const dropped: string[] = [];
    const t = new UsageTracker({ maxUniqueIds: 2, onDropped: (n) => dropped.push(n) });
    const u = t.uniqueCounter("u");
    for (const id of ["1", "2", "3", "2"]) u.add(id);
    expect(t.collect()?.uniqueCounters.u).toEqual(["1", "2"]);
    expect(dropped).toEqual(["u"]);
    t.subtract(t.collect()!);
    u.add("3");
    expect(t.collect()?.uniqueCounters.u).toEqual(["3"]);
  });
});

describe("UsageReporter", () => {
  test("counts made while a report is on the wire stay for the next one", async () => {
    const t = new UsageTracker();
    const c = t.counter("k8s_api_proxy_request");
    const { reporter, pending, results } = harness(t);
    c.inc(2);
    const first = reporter.report(signal);
    await flush();
    c.inc(); // while GitLab has not answered yet
    pending[0]!.answer(true);
    expect(await first).toBe("accepted");
    expect(pending[0]!.data.counters).toEqual({ k8s_api_proxy_request: 2 });
    const second = reporter.report(signal);
    await flush();
    pending[1]!.answer(true);
    await second;
    expect(pending[1]!.data.counters).toEqual({ k8s_api_proxy_request: 1 });
    expect(await reporter.report(signal)).toBe("nothing");
    expect(results).toEqual(["accepted", "accepted", "nothing"]);
  });

  test("GitLab's 400 drops the report (it would refuse it every time); other failures keep it", async () => {
    const t = new UsageTracker();
    const c = t.counter("a");
    const { reporter, pending } = harness(t);
    c.inc();
    const failed = reporter.report(signal);
    await flush();
    pending[0]!.answer(502);
    expect(await failed).toBe("failed");
    const refused = reporter.report(signal);
    await flush();
    pending[1]!.answer(400);
    expect(await refused).toBe("refused");
    expect(t.collect()).toBeUndefined();
  });

  test("reports run one at a time: a second waits for the first's answer", async () => {
    const t = new UsageTracker();
    t.counter("a").inc();
    const { reporter, pending } = harness(t);
    const one = reporter.report(signal);
    const two = reporter.report(signal);
    await flush();
    expect(pending.length).toBe(1);
    pending[0]!.answer(false);
    await one;
    await flush();
    expect(pending.length).toBe(2);
    pending[1]!.answer(true);
    expect(await two).toBe("accepted");
  });

  test("property: whatever GitLab answers and whenever counts come, GitLab takes each count exactly once and each id at least once", async () => {
    type Step =
      | { kind: "inc"; n: number }
      | { kind: "add"; id: number }
      | { kind: "report"; ok: boolean; countWhileSending: number };
    const step: fc.Arbitrary<Step> = fc.oneof(
      fc.record({ kind: fc.constant("inc" as const), n: fc.integer({ min: 1, max: 5 }) }),
      fc.record({ kind: fc.constant("add" as const), id: fc.integer({ min: 1, max: 20 }) }),
      fc.record({ kind: fc.constant("report" as const), ok: fc.boolean(), countWhileSending: fc.nat(3) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 40 }), async (steps) => {
        const t = new UsageTracker();
        const c = t.counter("c");
        const u = t.uniqueCounter("u");
        const { reporter, pending } = harness(t);
        let counted = 0;
        let taken = 0;
        const added = new Set<string>();
        const seen = new Set<string>();
        const report = async (ok: boolean, during: number) => {
          const done = reporter.report(signal);
          await flush();
          const p = pending.at(-1);
          for (let i = 0; i < during; i++) {
            c.inc();
            counted++;
          }
          if (p && !p.answered) {
            p.answered = true;
            p.answer(ok);
            if (ok) {
              taken += p.data.counters.c ?? 0;
              for (const id of p.data.uniqueCounters.u ?? []) seen.add(id);
            }
          }
          await done;
        };
        for (const s of steps) {
          if (s.kind === "inc") {
            c.inc(s.n);
            counted += s.n;
          } else if (s.kind === "add") {
            u.add(String(s.id));
            added.add(String(s.id));
          } else await report(s.ok, s.countWhileSending);
        }
        // GitLab is back: the rest arrives.
        await report(true, 0);
        expect(taken).toBe(counted);
        expect(seen).toEqual(added);
        expect(t.collect()).toBeUndefined();
      }),
      { numRuns: 200 },
    );
  });
});
