// The dashboard's login and sessions as an attacker sees them, over real HTTP on loopback: a burst
// of guesses gets no more verdicts than the throttle allows, and a session that logged out stays out.
import { type IncomingHttpHeaders, request } from "node:http";
import { describe, expect, test } from "vitest";
import { serveDashboard } from "../../cmd/kas/dashboard/server.ts";
import { MemoryViewsHub } from "../support/memory-views-hub.ts";

const TOKEN = "a-dashboard-token-of-some-length";
const quiet = { error: () => {}, debug: () => {}, info: () => {} };
const noAssets = { "app.js": Buffer.from(""), "app.css": Buffer.from("") };

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
}

/**
 * A login form sent as a browser may: `Expect: 100-continue`, the body only once the server has
 * said "100 Continue", which it says as it hands the request to the dashboard's handler. `heard`
 * is told then; the body goes once `gate` opens. With the gate opened after the whole burst was
 * heard, every guess is in the handler before any of them has a body: a throttle that counts only
 * finished verdicts lets them all through.
 */
function heldLogin(url: string, token: string, heard: () => void, gate: Promise<void>): Promise<Answer> {
  const form = new URLSearchParams({ token }).toString();
  return new Promise((resolve, reject) => {
    const req = request(`${url}/login`, {
      method: "POST",
      agent: false, // a connection of its own: concurrent, as an attacker's burst is
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        "content-length": Buffer.byteLength(form),
        expect: "100-continue",
      },
    });
    req.on("continue", () => {
      heard();
      void gate.then(() => req.end(form));
    });
    req.on("response", (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
      // Refused before its body was read: the form need not be sent at all.
      req.destroy();
    });
    req.on("error", reject);
    req.flushHeaders();
  });
}

describe("login throttle", () => {
  test("a burst of concurrent guesses from one address gets at most the limit's worth of verdicts", async () => {
    const limit = 10;
    const burst = 100;
    const dashboard = await serveDashboard({
      listen: { address: { host: "127.0.0.1", port: 0 } },
      token: TOKEN,
      sessionTtlMs: 60_000,
      hub: new MemoryViewsHub(),
      assets: noAssets,
      maxLoginFailures: limit,
      log: quiet,
    });
    try {
      let open!: () => void;
      const gate = new Promise<void>((resolve) => {
        open = resolve;
      });
      let heard = 0;
      const onHeard = () => {
        if (++heard === burst) open();
      };
      const answers = await Promise.all(
        Array.from({ length: burst }, (_, i) => heldLogin(dashboard.url, `guess-${i}`, onHeard, gate)),
      );
      const statuses = answers.map((res) => res.status);
      const compared = statuses.filter((s) => s === 401).length;
      const refused = answers.filter((res) => res.status === 429);
      expect({ compared, refused: refused.length }).toEqual({ compared: limit, refused: burst - limit });
      for (const res of refused) expect(Number(res.headers["retry-after"])).toBeGreaterThan(0);
      // The right token from that address is refused too while the window lasts: no verdict at all.
      const late = await heldLogin(dashboard.url, TOKEN, () => {}, Promise.resolve());
      expect(late.status).toBe(429);
      expect(late.headers["set-cookie"]).toBeUndefined();
    } finally {
      await dashboard.close(100);
    }
  });
});
