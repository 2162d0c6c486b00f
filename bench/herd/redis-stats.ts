// Redis commands served, by name (INFO commandstats): every replica's and the probe's together.
import { Redis } from "ioredis";

export async function redisCalls(port: number): Promise<Map<string, number>> {
  const redis = new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 0 });
  try {
    await redis.connect();
    const info = await redis.info("commandstats");
    const calls = new Map<string, number>();
    for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(m[1]!, Number(m[2]));
    return calls;
  } finally {
    redis.disconnect();
  }
}

/** `after` less `before`, most called first. */
export function callsBetween(
  before: Map<string, number>,
  after: Map<string, number>,
): Array<[string, number]> {
  return [...after]
    .map(([name, n]): [string, number] => [name, n - (before.get(name) ?? 0)])
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1]);
}
