import { randomFillSync } from "node:crypto";

/**
 * Largest payload {@link binaryFrame} frames; larger messages go through ws, which hands the
 * payload to the socket without a copy and masks it natively.
 */
export const SMALL_FRAME_MAX = 1024;

/** Masking keys come from one random pool, refilled when used up (as ws does). */
const keys = Buffer.alloc(4096);
let nextKey = keys.length;

/**
 * One whole binary message (RFC 6455 §5.2: FIN, opcode 2) as a single buffer, header and payload
 * together, masked with a fresh random key when `mask` (a client's frames must be). For payloads up
 * to {@link SMALL_FRAME_MAX} bytes.
 *
 * Why not `ws.send`: for a small message its Sender costs more than the frame. A server's frame
 * leaves as two buffers (header, payload) corked into one writev, a client's goes through a
 * callback-carrying send; a gRPC unary call sends three such messages.
 */
export function binaryFrame(payload: Uint8Array, mask: boolean): Buffer {
  const length = payload.length;
  if (length > SMALL_FRAME_MAX)
    throw new RangeError(`binaryFrame: ${length} bytes exceed ${SMALL_FRAME_MAX}`);
  const extended = length > 125 ? 2 : 0;
  const start = 2 + extended + (mask ? 4 : 0);
  const frame = Buffer.allocUnsafe(start + length);
  frame[0] = 0x82;
  frame[1] = (extended ? 126 : length) | (mask ? 0x80 : 0);
  if (extended) frame.writeUInt16BE(length, 2);
  if (!mask) {
    frame.set(payload, start);
    return frame;
  }
  if (nextKey === keys.length) {
    randomFillSync(keys);
    nextKey = 0;
  }
  const k = start - 4;
  for (let i = 0; i < 4; i++) frame[k + i] = keys[nextKey + i]!;
  nextKey += 4;
  for (let i = 0; i < length; i++) frame[start + i] = payload[i]! ^ frame[k + (i & 3)]!;
  return frame;
}
