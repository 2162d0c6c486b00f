import { StatusError } from "../../../lib/tunnel/errors.ts";

/**
 * Thrown by a front's handler to answer with `status` and `message`: the caller's mistake (a
 * malformed path, a missing credential), not a failure of the daemon. The guard (see
 * `guardRequests`) answers it in the front's error format and logs it at debug level only.
 */
export class HttpError extends StatusError {
  override name = "HttpError";
}
