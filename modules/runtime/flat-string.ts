// V8 builds some strings as ropes (a tree of cons strings): JSON.stringify's output past a few
// hundred characters, crypto.randomUUID's (its hex pieces joined: ~480 B kept instead of ~57), long
// `+` chains. Reading one character flattens a rope into one sequential string, and its pieces go.
// For strings kept a long time, one or more per agent.

/** `s`, flattened (the same string value). */
export function flat(s: string): string {
  s.charCodeAt(0);
  return s;
}
