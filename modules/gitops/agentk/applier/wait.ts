// Phase 7 of a sync: what was applied is polled until ready, within reconcile_timeout (or until a
// newer commit cuts the wait short); what is not ready turns its outcome into a failure.
import { refKey } from "./inventory.ts";
import { errorMessage, objectSpec, pick } from "./kube.ts";
import { readiness } from "./readiness.ts";
import { type Applied, type ApplierEvent, type ObjectOutcome, pause, type SyncContext } from "./sync.ts";

/**
 * Awaits the applied objects; marks the outcomes of those not ready as failed and resolves with the
 * sync's error for them ("" when all are ready).
 */
export async function awaitApplied(
  sync: SyncContext,
  applied: Applied[],
  outcomes: ObjectOutcome[],
  waitSignal: AbortSignal | undefined,
  onEvent: (event: ApplierEvent) => void,
): Promise<string> {
  const timeoutMs = sync.project.reconcile_timeout;
  const notReady = await awaitReady(sync, applied, waitSignal, onEvent);
  if (notReady.size === 0) return "";
  for (const o of outcomes) {
    const reason = o.source && notReady.get(refKey(o));
    if (reason) {
      o.status = "failed";
      o.error = reason;
    }
  }
  const failed = [...notReady.values()].some((r) => r.startsWith("failed"));
  return waitSignal?.aborted && !failed
    ? `${notReady.size} object(s) not ready yet when the wait was cut short`
    : `${notReady.size} object(s) not ready within reconcile_timeout (${timeoutMs} ms)`;
}

/** Polls the applied objects until each is ready; resolves with those that are not (key -> why). */
async function awaitReady(
  sync: SyncContext,
  applied: Applied[],
  waitSignal: AbortSignal | undefined,
  onEvent: (event: ApplierEvent) => void,
): Promise<Map<string, string>> {
  const timeoutMs = sync.project.reconcile_timeout;
  const deadline = Date.now() + timeoutMs;
  const stop = AbortSignal.any([sync.signal, waitSignal].filter((s): s is AbortSignal => s !== undefined));
  const reasons = new Map<string, string>();
  let pending = applied;
  for (;;) {
    const still: Applied[] = [];
    for (const p of pending) {
      const why = await notReadyReason(sync, p);
      if (why === undefined) reasons.delete(refKey(p));
      else {
        reasons.set(refKey(p), why.reason);
        if (!why.failed) still.push(p);
      }
    }
    pending = still;
    if (pending.length === 0) break;
    if (Date.now() >= deadline || stop.aborted) {
      const cut = stop.aborted ? "wait cut short" : `not ready within reconcile_timeout (${timeoutMs} ms)`;
      for (const p of pending) reasons.set(refKey(p), `${cut}: ${reasons.get(refKey(p))}`);
      break;
    }
    onEvent({ type: "waiting", pending: pending.map(pick) });
    await pause(Math.min(sync.pollMs, Math.max(0, deadline - Date.now())), stop);
  }
  return reasons;
}

/** Why the object is not ready (failed: it will not become ready), or undefined when it is. */
async function notReadyReason(
  sync: SyncContext,
  p: Applied,
): Promise<{ reason: string; failed: boolean } | undefined> {
  try {
    const live = await sync.api.read(objectSpec(p.apiVersion, p));
    const r = readiness(p.group, live as never);
    if (r.ready) return undefined;
    return r.failed ? { reason: `failed: ${r.reason}`, failed: true } : { reason: r.reason, failed: false };
  } catch (err) {
    return { reason: `cannot read it: ${errorMessage(err)}`, failed: false };
  }
}
