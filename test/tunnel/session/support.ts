import { once } from "node:events";
import type { Readable } from "node:stream";

/** Reads a stream to its end without destroying it (async iteration would). */
export async function readAll(s: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  s.on("data", (c: Buffer) => chunks.push(c));
  s.resume(); // a 'readable' listener used earlier leaves the stream paused
  await once(s, "end");
  return Buffer.concat(chunks).toString();
}
