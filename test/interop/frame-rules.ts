import { F, type RawFrame, T } from "./raw-wire.ts";

// What must hold, field by field, for the frames one side writes for a stream's life, whether the
// writer is hashicorp/yamux or ours. The wire tests apply these rules to the reference's capture
// first (so a rule that the reference itself breaks is caught as a wrong rule) and then to ours.

export const isStreamFrame = (f: RawFrame) => f.type === T.Data || f.type === T.WindowUpdate;

export function framesOf(frames: RawFrame[], streamId: number): RawFrame[] {
  return frames.filter((f) => isStreamFrame(f) && f.streamId === streamId);
}

export interface StreamExpectation {
  streamId: number;
  /** The opener's first frame carries exactly SYN; the acceptor's first frame exactly ACK. */
  first: "SYN" | "ACK";
  /** The Data payloads, concatenated. */
  payload: string;
}

/**
 * Rules for one stream, as a list of violations (empty when all hold):
 * - every frame: version 0;
 * - the first frame: flags exactly SYN (opener) or exactly ACK (acceptor), on a Data frame or on a
 *   WindowUpdate (the reference uses a WindowUpdate with length 0: the initial window needs no delta);
 * - no later frame carries SYN or ACK again, and none carries RST;
 * - FIN appears exactly once, on the stream's last frame (a FIN on a Data frame is allowed);
 * - Data lengths equal their payloads, and the payloads concatenate to what the application wrote.
 */
export function streamViolations(frames: RawFrame[], e: StreamExpectation): string[] {
  const out: string[] = [];
  const mine = framesOf(frames, e.streamId);
  if (mine.length === 0) return [`no frames for stream ${e.streamId}`];
  const first = mine[0]!;
  const want = e.first === "SYN" ? F.SYN : F.ACK;
  if (first.flags !== want)
    out.push(`first frame of stream ${e.streamId} has flags ${first.flags}, want ${want}`);
  mine.forEach((f, i) => {
    if (f.version !== 0) out.push(`frame ${i} of stream ${e.streamId}: version ${f.version}`);
    if (i > 0 && f.flags & (F.SYN | F.ACK)) out.push(`frame ${i} of stream ${e.streamId} repeats SYN/ACK`);
    if (f.flags & F.RST) out.push(`frame ${i} of stream ${e.streamId} carries RST`);
    if (f.type === T.Data && f.payload.length !== f.length)
      out.push(`frame ${i}: length ${f.length} != payload`);
  });
  const fins = mine.filter((f) => f.flags & F.FIN);
  if (fins.length !== 1) out.push(`stream ${e.streamId} has ${fins.length} FIN frames, want 1`);
  else if (!(mine.at(-1)!.flags & F.FIN)) out.push(`FIN of stream ${e.streamId} is not its last frame`);
  const payload = Buffer.concat(mine.filter((f) => f.type === T.Data).map((f) => f.payload)).toString();
  if (payload !== e.payload) out.push(`stream ${e.streamId} carried ${JSON.stringify(payload)}`);
  return out;
}

/** The first frame of a stream where ours must equal the reference field by field (type may differ only Data vs WindowUpdate with length 0). */
export function openingFields(frames: RawFrame[], streamId: number) {
  const f = framesOf(frames, streamId)[0];
  if (!f) return undefined;
  return { version: f.version, flags: f.flags, streamId: f.streamId };
}
