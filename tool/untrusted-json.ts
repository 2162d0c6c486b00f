// What another process wrote where others can write too (a shared Redis: keys, channels) is read
// like any input: parsed without throwing, then checked field by field by its reader.

/** `text` as a JSON object (an array counts), or undefined when it is malformed or not an object. */
export function parseJsonObject(text: string): Record<string, unknown> | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  return typeof value === "object" && value !== null ? (value as Record<string, unknown>) : undefined;
}
