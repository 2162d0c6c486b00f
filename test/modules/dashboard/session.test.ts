// A dashboard session ends with the configured ttl, whatever its cookie says of its own expiry: a
// cookie signed for longer (an older, longer session_ttl) is refused once the ttl has passed.
import type { IncomingMessage } from "node:http";
import { afterEach, expect, test, vi } from "vitest";
import { MemoryRevocations } from "../../../modules/dashboard/kas/revocations.ts";
import { dashboardSessions } from "../../../modules/dashboard/kas/session.ts";

afterEach(() => {
  vi.useRealTimers();
});

const requestWith = (setCookie: string) =>
  ({ headers: { cookie: setCookie.split(";")[0] } }) as unknown as IncomingMessage;

test("a cookie older than session_ttl is refused even though its own exp is later", async () => {
  vi.useFakeTimers({ toFake: ["Date"] });
  const revocations = new MemoryRevocations();
  const long = dashboardSessions("token", { ttlMs: 3600_000, secure: false, revocations });
  const short = dashboardSessions("token", { ttlMs: 60_000, secure: false, revocations });
  const req = requestWith(await long.issue());
  expect(await short.of(req)).toBeDefined();
  vi.setSystemTime(Date.now() + 30_000);
  expect(await short.of(req)).toBeDefined();
  vi.setSystemTime(Date.now() + 60_000); // 90 s after issue: past 60 s plus the clocks' 5 s
  expect(await short.of(req)).toBeUndefined();
  expect(await long.of(req)).toBeDefined();
});
