// Each agent connection (tunnel) gets its own id, so that two connections of one agent (two agentk
// replicas, or several tunnels of one) are told apart in what kas lists. GitLab's agent numbers
// connections the same way: a random positive int64 per connection, nothing to coordinate between
// kas replicas; two of an agent's connections collide with probability 2^-63.
import { randomBytes } from "node:crypto";

const INT63 = (1n << 63n) - 1n;

/** A random id in [1, 2^63 - 1], in decimal (int64 on GitLab's wire). */
export function newConnectionId(random: (size: number) => Buffer = randomBytes): string {
  for (;;) {
    const id = random(8).readBigUInt64BE() & INT63;
    if (id !== 0n) return id.toString();
  }
}

/** Whether `s` is such an id: the check for ids read back from Redis. */
export function isConnectionId(s: unknown): s is string {
  return typeof s === "string" && /^[1-9]\d{0,18}$/.test(s) && BigInt(s) <= INT63;
}
