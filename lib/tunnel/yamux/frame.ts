// Wire format of hashicorp/yamux (spec.md): a 12-byte big-endian header, then `length` payload bytes
// for Data frames only. For WindowUpdate the length is the window delta, for Ping the opaque value,
// for GoAway the error code.

export const PROTOCOL_VERSION = 0;
export const HEADER_SIZE = 12;
/** Every stream starts with this receive window; larger windows are announced with updates. */
export const INITIAL_WINDOW = 256 * 1024;

export const FrameType = { Data: 0, WindowUpdate: 1, Ping: 2, GoAway: 3 } as const;
export type FrameType = (typeof FrameType)[keyof typeof FrameType];

/** Flags are bits and combine (the reference sends ACK|FIN when a stream closes before replying). */
export const Flag = { SYN: 1, ACK: 2, FIN: 4, RST: 8 } as const;

export const GoAwayCode = { Normal: 0, ProtocolError: 1, InternalError: 2 } as const;
export type GoAwayCode = (typeof GoAwayCode)[keyof typeof GoAwayCode];

export interface FrameHeader {
  version: number;
  type: FrameType;
  flags: number;
  streamId: number;
  length: number;
}

export function writeHeader(
  target: Buffer,
  offset: number,
  type: FrameType,
  flags: number,
  streamId: number,
  length: number,
): void {
  target[offset] = PROTOCOL_VERSION;
  target[offset + 1] = type;
  target.writeUInt16BE(flags, offset + 2);
  target.writeUInt32BE(streamId, offset + 4);
  target.writeUInt32BE(length, offset + 8);
}

export function encodeHeader(type: FrameType, flags: number, streamId: number, length: number): Buffer {
  const buf = Buffer.allocUnsafe(HEADER_SIZE);
  writeHeader(buf, 0, type, flags, streamId, length);
  return buf;
}

/** A Data frame as one buffer: header and payload together, so the transport sends them as one message. */
export function encodeDataFrame(flags: number, streamId: number, payload: Uint8Array): Buffer {
  const buf = Buffer.allocUnsafe(HEADER_SIZE + payload.length);
  writeHeader(buf, 0, FrameType.Data, flags, streamId, payload.length);
  buf.set(payload, HEADER_SIZE);
  return buf;
}

export function readHeader(buf: Buffer, offset = 0): FrameHeader {
  return {
    version: buf[offset]!,
    type: buf[offset + 1]! as FrameType,
    flags: buf.readUInt16BE(offset + 2),
    streamId: buf.readUInt32BE(offset + 4),
    length: buf.readUInt32BE(offset + 8),
  };
}
