// What gRPC handlers on GitLab's API share: failures as statuses, and a signal that follows the call.
import * as grpc from "@grpc/grpc-js";
import type { AgentRpc, AgentSession } from "./kas.ts";

/** A failure a handler passes to its callback (or `call.destroy`): the caller reads `code` and `details`. */
export function rpcError(code: grpc.status, details: string): grpc.ServiceError {
  return Object.assign(new Error(details), { code, details, metadata: new grpc.Metadata() });
}

/**
 * The agent whose tunnel carries `call` (see `AgentRpc.agentOf`), or undefined when there is none:
 * `fail` then got the status (a unary call's callback, or a stream's `error` event).
 */
export function callingAgent(
  rpc: Pick<AgentRpc, "agentOf">,
  call: { readonly metadata: grpc.Metadata },
  fail: (err: grpc.ServiceError) => void,
): AgentSession | undefined {
  try {
    return rpc.agentOf(call);
  } catch (err) {
    fail(err as grpc.ServiceError);
    return undefined;
  }
}

/**
 * Holds an agent's server stream open until it ends, then runs `cleanup` once: the caller cancelled,
 * or the call closed or finished, or the agent's tunnel closed (the call is ended then: nothing more
 * can reach the agent over it).
 */
export function untilStreamEnds(
  call: { end(): void; on(event: "cancelled" | "close" | "finish", listener: () => void): unknown },
  session: AgentSession,
  cleanup: () => void,
): void {
  let open = true;
  const done = () => {
    if (!open) return;
    open = false;
    session.off("close", end);
    cleanup();
  };
  const end = () => {
    done();
    call.end();
  };
  call.on("cancelled", done);
  call.on("close", done);
  call.on("finish", done);
  // `on`, not `once` (done takes it off): `once` would add a wrapper and its state per stream.
  session.on("close", end);
}

interface ServerCall {
  readonly cancelled: boolean;
  getDeadline(): grpc.Deadline;
  on(event: "cancelled", listener: () => void): unknown;
}

/**
 * Aborts when the call ends before its handler does: the caller cancelled, went away, or its
 * deadline passed (grpc-js answers DEADLINE_EXCEEDED then; the signal's reason says which).
 */
export function callSignal(call: ServerCall): AbortSignal {
  const controller = new AbortController();
  const abort = () =>
    controller.abort(deadlinePassed(call) ? deadlineError() : new Error("the call was cancelled"));
  if (call.cancelled) abort();
  else call.on("cancelled", abort);
  return controller.signal;
}

/** Whether the call's deadline (if any) has passed. */
export function deadlinePassed(call: Pick<ServerCall, "getDeadline">): boolean {
  const deadline = call.getDeadline();
  const at = deadline instanceof Date ? deadline.getTime() : deadline;
  return Number.isFinite(at) && Date.now() >= at;
}

function deadlineError(): Error {
  return Object.assign(new Error("the call's deadline passed"), { name: "DeadlineExceeded" });
}

/** Positive int64 ids as ts-proto decodes them (decimal strings); undefined for 0, negatives, garbage. */
export function positiveId(value: string): string | undefined {
  return /^[1-9]\d{0,18}$/.test(value) && BigInt(value) <= 0x7fffffffffffffffn ? value : undefined;
}
