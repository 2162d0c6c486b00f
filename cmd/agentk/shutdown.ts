// agentk's shutdown: each part closes in turn, and a part that fails to close says so.
import type { Logger } from "./observability/index.ts";

/** One part to close on shutdown, named for the logs. */
export interface ShutdownStep {
  name: string;
  close(): Promise<void>;
}

/**
 * Closes each step in order, whether or not the ones before it succeeded, logging each failure
 * with the step's name. Resolves false if any failed (agentk then exits non-zero).
 */
export async function shutDown(steps: readonly ShutdownStep[], log: Pick<Logger, "error">): Promise<boolean> {
  let ok = true;
  for (const step of steps) {
    try {
      await step.close();
    } catch (err) {
      ok = false;
      log.error({ err, step: step.name }, "failed to close on shutdown");
    }
  }
  return ok;
}
