export {
  acceptFrame,
  decodeHeader,
  decodeReply,
  encodeHeaderFrame,
  encodeRejectFrame,
  Kind,
  kindName,
  MAX_REJECT_REASON,
  RejectCode,
  type Reply,
  StreamHeader,
  type StreamHeaderInit,
  StreamReject,
} from "./codec.ts";
export { HeaderError, type HeaderErrorCode, rejectCodeName, StreamRejectedError } from "./errors.ts";
export {
  DEFAULT_MAX_HEADER_BYTES,
  type DecodeResult,
  encodeFrame,
  HeaderFrameDecoder,
  LENGTH_PREFIX_BYTES,
} from "./frame.ts";
export {
  DEFAULT_OPEN_TIMEOUT_MS,
  type OpenStream,
  type OpenWithHeaderOptions,
  openWithHeader,
} from "./open.ts";
export { type ReadFrameOptions, readFrame } from "./read-frame.ts";
export {
  type AdmitStream,
  DEFAULT_HEADER_TIMEOUT_MS,
  DEFAULT_REJECT_LINGER_MS,
  type DispatchResult,
  type RegisterOptions,
  StreamDispatcher,
  type StreamDispatcherOptions,
  type StreamHandler,
} from "./stream-dispatcher.ts";
