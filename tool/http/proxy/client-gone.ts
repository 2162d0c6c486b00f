import { EventEmitter } from "node:events";

/**
 * "The client went away", as the signal of undici's `request` (documented as an AbortSignal or an
 * EventEmitter that emits "abort"; it reads `aborted` and `reason` of either). Both proxies make
 * one per request: an AbortController, its signal and undici's listener on it cost ~7 µs per
 * request, this ~0.3 µs. Once aborted it stays so, as a signal does.
 */
export class ClientGone extends EventEmitter {
  aborted = false;
  reason: Error | undefined;

  /** Without a reason, undici fails the request with its RequestAbortedError. */
  abort(reason?: Error): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit("abort");
  }
}
