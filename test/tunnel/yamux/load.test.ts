import { createHash } from "node:crypto";
import { afterEach, expect, test } from "vitest";
import {
  echo,
  randomBytes,
  type SessionPair,
  sessionPair,
  sha256,
  sha256Of,
  writeRandomly,
} from "./harness.ts";

let pair: SessionPair | undefined;
afterEach(() => pair?.close());

test("1,000 concurrent streams each echo 256 KiB intact (SHA-256)", async () => {
  pair = await sessionPair();
  echo(pair.server);
  const results = await Promise.all(
    Array.from({ length: 1000 }, async () => {
      const data = randomBytes(256 * 1024);
      const s = await pair!.client.open();
      const [got] = await Promise.all([sha256Of(s), writeRandomly(s, data, 32 * 1024)]);
      return got.hex === sha256(data) && got.bytes === data.length;
    }),
  );
  expect(results.filter((ok) => !ok)).toHaveLength(0);
  expect(pair.client.stats.openStreams).toBe(0);
}, 120_000);

test("1 GiB through one stream with random write sizes arrives intact (SHA-256)", async () => {
  pair = await sessionPair();
  const received = new Promise<{ hex: string; bytes: number }>((resolve) =>
    pair!.server.once("stream", (s) => resolve(sha256Of(s))),
  );
  const s = await pair.client.open();
  // 1 GiB from a 64 MiB random block written 16 times, in random-sized pieces.
  const block = randomBytes(64 * 1024 * 1024);
  const expected = createHash("sha256");
  for (let i = 0; i < 16; i++) expected.update(block);
  for (let i = 0; i < 16; i++) {
    await writeRandomly(s, block, 256 * 1024, false);
  }
  s.end();
  const got = await received;
  expect(got.bytes).toBe(1024 * 1024 * 1024);
  expect(got.hex).toBe(expected.digest("hex"));
}, 180_000);
