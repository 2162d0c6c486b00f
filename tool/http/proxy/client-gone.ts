import { EventEmitter } from "node:events";
import type { ServerResponse } from "node:http";

/**
 * "The client went away" before `res` finished, as the signal of undici's `request` (documented
 * as an AbortSignal or an EventEmitter that emits "abort"; it reads `aborted` and `reason` of
 * either). Both proxies make one per request: an AbortController, its signal and undici's
 * listener on it cost ~7 µs per request, this ~0.3 µs. Once aborted it stays so, as a signal does.
 */
export class ClientGone extends EventEmitter {
  aborted = false;
  reason: Error | undefined;
  /**
   * `res`'s close listener: aborts unless the response had finished. Made in the constructor,
   * not as a field initializer, so no per-request function naming under tsx (esbuild keepNames).
   */
  readonly onClose: () => void;

  /**
   * `reason`: the message of the error undici fails the request with; without one, the
   * DOMException an AbortController's `abort()` gives.
   */
  constructor(res: ServerResponse, reason?: string) {
    super();
    this.onClose = () => {
      if (!res.writableFinished)
        this.abort(
          reason === undefined
            ? new DOMException("This operation was aborted", "AbortError")
            : new Error(reason),
        );
    };
  }

  abort(reason: Error): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit("abort");
  }
}
