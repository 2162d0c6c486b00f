// The two shapes the project's errors share, for every layer from here up: an error with a `code`
// a caller switches on, and an HTTP refusal with a `status` (and headers to answer with). Each
// subclass keeps its own `name` (one line: `override name = "X"`), its fields and `instanceof`.

/** An error with a `code` (a reason's name, a gRPC status) beside its message; `cause` kept. */
export class CodedError<C> extends Error {
  readonly code: C;

  constructor(code: C, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
  }
}

/** An HTTP refusal: the `status` to answer with, its message, and extra response headers. */
export class StatusError extends Error {
  readonly status: number;
  /** Extra response headers, e.g. `www-authenticate` with a 401. */
  readonly headers: Readonly<Record<string, string>>;

  constructor(status: number, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.status = status;
    this.headers = headers;
  }
}
