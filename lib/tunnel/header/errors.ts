import { type RejectCode, rejectCodeToJSON } from "../../../proto/gen/tunnel/v1/tunnel.ts";
import { CodedError } from "../errors.ts";

/** Why a header (or reply) frame could not be read from a stream. */
export type HeaderErrorCode =
  /** The length prefix announced more bytes than allowed; nothing past the prefix was buffered. */
  | "TOO_LARGE"
  /** The frame arrived but does not decode. */
  | "MALFORMED"
  /** The stream ended, failed or was destroyed before a whole frame arrived. */
  | "CLOSED"
  /** No whole frame before the deadline. */
  | "TIMEOUT";

/** A local failure to read or decode a frame. Parsers return it; they never throw on input. */
export class HeaderError extends CodedError<HeaderErrorCode> {
  override readonly name = "HeaderError";
}

/** The accepting side refused the stream; `reason` is its human-readable explanation. */
export class StreamRejectedError extends CodedError<RejectCode> {
  override readonly name = "StreamRejectedError";
  readonly reason: string;

  constructor(code: RejectCode, reason: string) {
    super(code, `stream rejected (${rejectCodeName(code)}): ${reason}`);
    this.reason = reason;
  }
}

/** "NOT_FOUND" for REJECT_CODE_NOT_FOUND; codes from a newer peer print as their number. */
export function rejectCodeName(code: RejectCode): string {
  const name = rejectCodeToJSON(code);
  return name === "UNRECOGNIZED" ? `code ${code}` : name.replace(/^REJECT_CODE_/, "");
}
