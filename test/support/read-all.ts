import type { Readable } from "node:stream";

/** Reads a stream to its end, without destroying it (async iteration would); rejects on its error. */
export function readAll(stream: Readable): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.once("end", () => resolve(Buffer.concat(chunks)));
    stream.once("error", reject);
    stream.resume(); // a 'readable' listener used earlier leaves the stream paused
  });
}

/** readAll as UTF-8 text. */
export async function readText(stream: Readable): Promise<string> {
  return (await readAll(stream)).toString();
}
