export { FrameDecoder, type FrameHandler } from "./decoder.ts";
export { ProtocolError, YamuxError } from "./errors.ts";
export {
  encodeDataFrame,
  encodeHeader,
  Flag,
  type FrameHeader,
  FrameType,
  GoAwayCode,
  HEADER_SIZE,
  INITIAL_WINDOW,
  PROTOCOL_VERSION,
  readHeader,
} from "./frame.ts";
export type { MessagePath } from "./message-path.ts";
export type { SessionOptions } from "./options.ts";
export { Session, type SessionEvents, type SessionStats } from "./session.ts";
export { YamuxStream } from "./stream.ts";
