// Many small periodic writes to Redis (a key's TTL kept alive, per agent or per token) as few round
// trips: each write is a Lua script (atomic on its own) sent by its SHA, and the writes due at one
// moment go out together, a pipeline at a time. Sent one by one, each was a socket write of its
// own and a Redis round trip: with thousands of agents, a large share of an idle kas's work.
import type { ChainableCommander, Redis } from "ioredis";

export type RedisScriptArg = string | number;

/** Queues one run of a script into `pipeline`. */
export type RedisScript = (
  pipeline: ChainableCommander,
  keys: readonly string[],
  args: readonly RedisScriptArg[],
) => void;

/**
 * `lua` as a command of `client` named `name` (ioredis `defineCommand`): EVALSHA, and EVAL the
 * first time on each connection (or after a NOSCRIPT, a Redis that restarted), so the script's text
 * crosses the wire once per connection rather than with every run. `name` must be unique to the
 * script on that client; defining it again with the same script is harmless.
 */
export function redisScript(client: Redis, name: string, lua: string): RedisScript {
  client.defineCommand(name, { lua });
  return (pipeline, keys, args) => {
    // A pipeline gets the client's defined commands as methods of its own, untyped.
    const run = (pipeline as unknown as Record<string, (...a: RedisScriptArg[]) => unknown>)[name];
    if (run === undefined) throw new Error(`Redis script ${name} is not defined on this client`);
    run.call(pipeline, keys.length, ...keys, ...args);
  };
}

/** Items per pipeline: one write, and one reply to read, of bounded size. */
export const PIPELINE_CHUNK = 500;

/**
 * Sends `items`, `chunk` at a time, one pipeline each (`add` queues an item's commands), a chunk
 * after the previous one's replies. Never rejects: resolves with the first error met (a command
 * that failed, or a chunk that could not be sent), undefined if none, for the caller to log once
 * rather than once per item.
 */
export async function inPipelines<T>(
  client: Redis,
  items: readonly T[],
  add: (pipeline: ChainableCommander, item: T) => void,
  chunk = PIPELINE_CHUNK,
): Promise<Error | undefined> {
  let first: Error | undefined;
  for (let i = 0; i < items.length; i += chunk) {
    try {
      const pipeline = client.pipeline();
      for (const item of items.slice(i, i + chunk)) add(pipeline, item);
      const replies = (await pipeline.exec()) ?? [];
      first ??= replies.find(([err]) => err)?.[0] ?? undefined;
    } catch (err) {
      first ??= err as Error;
    }
  }
  return first;
}
