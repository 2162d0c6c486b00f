import type { Readable } from "node:stream";
import type fc from "fast-check";

export { sessionPair } from "../../support/loopback.ts";
export { readAll } from "../../support/read-all.ts";

/**
 * Everything the readable yields until it ends. Not `for await`: finishing the iterator destroys
 * the stream, which would reset a Duplex whose writable side is still in use.
 */
/** Resolves once the stream has closed (any cause); rejects after `ms`. */
export function closed(stream: Readable, ms: number): Promise<void> {
  if (stream.closed) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`stream not closed within ${ms} ms`)), ms);
    stream.once("close", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/**
 * Metadata keys as a header may carry them, less "__proto__": ts-proto decodes map entries into a
 * plain object, where that key is inert (it never becomes an entry).
 */
export function metadataKeys(keys: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return keys.filter((k) => k !== "__proto__");
}
