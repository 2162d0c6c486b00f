/**
 * Thrown by a front's handler to answer with `status` and `message`: the caller's mistake (a
 * malformed path, a missing credential), not a failure of the daemon. The guard (see
 * `guardRequests`) answers it in the front's error format and logs it at debug level only.
 */
export class HttpError extends Error {
  override name = "HttpError";
  readonly status: number;
  /** Extra response headers, e.g. `www-authenticate` with a 401. */
  readonly headers: Readonly<Record<string, string>>;

  constructor(status: number, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.status = status;
    this.headers = headers;
  }
}
