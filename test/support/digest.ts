import { createHash } from "node:crypto";
import type { Readable } from "node:stream";

/** Reads to the end; the SHA-256 (hex) of everything read and its length. */
export async function sha256Of(
  readable: AsyncIterable<Uint8Array> | Readable,
): Promise<{ hex: string; bytes: number }> {
  const h = createHash("sha256");
  let bytes = 0;
  for await (const chunk of readable) {
    h.update(chunk as Uint8Array);
    bytes += (chunk as Uint8Array).length;
  }
  return { hex: h.digest("hex"), bytes };
}
