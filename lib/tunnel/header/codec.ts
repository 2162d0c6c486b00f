import {
  Kind,
  kindToJSON,
  RejectCode,
  StreamHeader,
  StreamReject,
} from "../../../proto/gen/tunnel/v1/tunnel.ts";
import { HeaderError } from "./errors.ts";
import { encodeFrame } from "./frame.ts";

/** What an opener supplies; unset fields take their protobuf defaults. */
export type StreamHeaderInit = Pick<StreamHeader, "kind"> & Partial<Omit<StreamHeader, "kind">>;

/** Longest reject reason sent, in UTF-16 units; keeps every reject well under any sane reply limit. */
export const MAX_REJECT_REASON = 1024;

const INT64 = /^-?(0|[1-9][0-9]{0,18})$/;

/** The header as a length-prefixed frame. Throws TypeError on a header no peer could accept. */
export function encodeHeaderFrame(init: StreamHeaderInit): Buffer {
  const header = StreamHeader.fromPartial(init);
  if (!INT64.test(header.agentId))
    throw new TypeError(`agentId must be a decimal int64, got ${header.agentId}`);
  let body: Uint8Array;
  try {
    body = StreamHeader.encode(header).finish();
  } catch (err) {
    throw new TypeError(`stream header does not encode: ${(err as Error).message}`, { cause: err });
  }
  return encodeFrame(body);
}

export function decodeHeader(body: Uint8Array): StreamHeader | HeaderError {
  try {
    return StreamHeader.decode(body);
  } catch (err) {
    return new HeaderError("MALFORMED", `stream header does not decode: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/** The acceptor's "go ahead": an empty frame. A reject is never empty (its code is non-zero). */
export function acceptFrame(): Buffer {
  return encodeFrame(new Uint8Array(0));
}

export function encodeRejectFrame(code: RejectCode, reason: string): Buffer {
  const message = reason.length > MAX_REJECT_REASON ? `${reason.slice(0, MAX_REJECT_REASON)}…` : reason;
  // An empty reply means "accepted": a refusal with nothing in it (code 0, no reason) would
  // encode to nothing and read as one. It goes out as INTERNAL, which a refusal never lacks.
  const sent =
    code === RejectCode.REJECT_CODE_UNSPECIFIED && message === "" ? RejectCode.REJECT_CODE_INTERNAL : code;
  return encodeFrame(StreamReject.encode({ code: sent, message }).finish());
}

export type Reply = { accepted: true } | { accepted: false; reject: StreamReject };

export function decodeReply(body: Uint8Array): Reply | HeaderError {
  if (body.length === 0) return { accepted: true };
  try {
    return { accepted: false, reject: StreamReject.decode(body) };
  } catch (err) {
    return new HeaderError("MALFORMED", `stream reply does not decode: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/** "GRPC" for KIND_GRPC; kinds this build does not know print as their number. */
export function kindName(kind: Kind): string {
  const name = kindToJSON(kind);
  return name === "UNRECOGNIZED" ? String(kind) : name.replace(/^KIND_/, "");
}

export { Kind, RejectCode, StreamHeader, StreamReject };
