// Git's pkt-line framing (gitprotocol-common): four hex digits giving the length of the line
// including themselves, then the payload; "0000" is a flush packet. Input comes from a remote
// server, so every malformation is a PktLineError, never anything else.

export class PktLineError extends Error {
  override name = "PktLineError";
}

/** A flush packet ("0000"): ends a section of the advertisement. */
export const FLUSH: unique symbol = Symbol("flush");
export type PktLine = Buffer | typeof FLUSH;

/** Largest pkt-line git writes (LARGE_PACKET_MAX): 65516 bytes of payload. */
export const MAX_PKT_LENGTH = 65520;

const HEX4 = /^[0-9a-f]{4}$/;

/** Splits `data` into pkt-lines (payloads without their length prefix; a trailing "\n" is kept). */
export function splitPktLines(data: Buffer): PktLine[] {
  const out: PktLine[] = [];
  let at = 0;
  while (at < data.length) {
    if (data.length - at < 4) throw new PktLineError(`truncated pkt-line length at byte ${at}`);
    const prefix = data.toString("latin1", at, at + 4);
    if (!HEX4.test(prefix))
      throw new PktLineError(`invalid pkt-line length ${JSON.stringify(prefix)} at byte ${at}`);
    const length = Number.parseInt(prefix, 16);
    if (length === 0) {
      out.push(FLUSH);
      at += 4;
      continue;
    }
    // 0001-0003 are protocol v2's delimiter packets: not part of a v0 advertisement.
    if (length < 4) throw new PktLineError(`unexpected special packet ${prefix} at byte ${at}`);
    if (length > MAX_PKT_LENGTH)
      throw new PktLineError(`pkt-line of ${length} bytes at byte ${at} is too long`);
    if (at + length > data.length) throw new PktLineError(`truncated pkt-line at byte ${at}`);
    out.push(data.subarray(at + 4, at + length));
    at += length;
  }
  return out;
}

/** One pkt-line carrying `payload`, or a flush packet. */
export function encodePktLine(payload: Buffer | string | typeof FLUSH): Buffer {
  if (payload === FLUSH) return Buffer.from("0000");
  const body = typeof payload === "string" ? Buffer.from(payload) : payload;
  const length = body.length + 4;
  if (length > MAX_PKT_LENGTH)
    throw new PktLineError(`payload of ${body.length} bytes does not fit a pkt-line`);
  return Buffer.concat([Buffer.from(length.toString(16).padStart(4, "0")), body]);
}
