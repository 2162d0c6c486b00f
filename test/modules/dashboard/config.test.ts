// The dashboard's and ActionCable's sections of kas's configuration: off by default, never open to
// the network without a token.
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { buildKasConfig, ConfigError } from "../../../cmd/kas/config/index.ts";
import { isLoopback } from "../../../modules/dashboard/kas/config.ts";

const MINIMAL = { agent: { static_tokens_file: "/etc/kas/tokens.yaml" } };
const issues = (raw: object, env: Record<string, string> = {}) => {
  try {
    buildKasConfig({ ...MINIMAL, ...raw }, env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).message.split("\n");
  }
  return [];
};

describe("dashboard", () => {
  test("off by default", () => {
    expect(buildKasConfig(MINIMAL, {}).dashboard).toEqual({
      listen: {},
      sessionTtlMs: 12 * 3_600_000,
      sessionGeneration: 1,
    });
  });

  test("on loopback it may run without a token; anywhere else a token is required", () => {
    expect(issues({ dashboard: { listen: { address: "127.0.0.1:8156" } } })).toEqual([]);
    expect(issues({ dashboard: { listen: { address: "[::1]:8156" } } })).toEqual([]);
    for (const address of [":8156", "0.0.0.0:8156", "10.0.0.5:8156", "dashboard.example.com:8156"]) {
      const found = issues({ dashboard: { listen: { address } } });
      expect(found).toHaveLength(1);
      expect(found[0]).toMatch(
        /^dashboard\.token_file: required when dashboard\.listen\.address is not a loopback address/,
      );
      expect(issues({ dashboard: { listen: { address }, token_file: "/etc/kas/dashboard_token" } })).toEqual(
        [],
      );
    }
  });

  test("from the environment, and clashing ports are named", () => {
    const config = buildKasConfig(MINIMAL, {
      KAS_DASHBOARD_LISTEN_ADDRESS: "127.0.0.1:8156",
      KAS_DASHBOARD_SESSION_TTL: "30m",
      KAS_DASHBOARD_SESSION_GENERATION: "3",
    });
    expect(config.dashboard).toEqual({
      listen: { address: { host: "127.0.0.1", port: 8156 } },
      sessionTtlMs: 1_800_000,
      sessionGeneration: 3,
    });
    expect(issues({ dashboard: { listen: { address: "127.0.0.1:8153" } } })).toEqual([
      expect.stringMatching(/^dashboard\.listen\.address: port 8153 is already used by api\.listen\.address/),
    ]);
  });

  test("the session generation is a positive integer: the operator raises it to end every session", () => {
    expect(
      buildKasConfig({ ...MINIMAL, dashboard: { session_generation: 7 } }, {}).dashboard.sessionGeneration,
    ).toBe(7);
    for (const session_generation of [0, -1, 1.5, "two"]) {
      expect(issues({ dashboard: { session_generation } })).toEqual([
        expect.stringMatching(/^dashboard\.session_generation: /),
      ]);
    }
  });

  test("isLoopback: 127.0.0.0/8, ::1 and localhost only", () => {
    fc.assert(fc.property(fc.ipV4(), (ip) => isLoopback({ host: ip, port: 1 }) === ip.startsWith("127.")));
    expect(isLoopback({ host: "localhost", port: 1 })).toBe(true);
    expect(isLoopback({ host: "[::1]", port: 1 })).toBe(true);
    expect(isLoopback({ host: "::", port: 1 })).toBe(false);
    expect(isLoopback({ host: "127.example.com", port: 1 })).toBe(false);
    expect(isLoopback({ host: undefined, port: 1 })).toBe(false);
  });
});

describe("action_cable", () => {
  test("off by default; a Redis URL without credentials, and the channel prefix", () => {
    expect(buildKasConfig(MINIMAL, {}).actionCable).toEqual({ maxPending: 1000 });
    const config = buildKasConfig(
      {
        ...MINIMAL,
        action_cable: { redis_url: "redis://cable-redis:6379/1", channel_prefix: "gitlab_production" },
      },
      {},
    );
    expect(config.actionCable).toEqual({
      redisUrl: "redis://cable-redis:6379/1",
      channelPrefix: "gitlab_production",
      maxPending: 1000,
    });
    expect(issues({ action_cable: { redis_url: "redis://:secret@cable-redis:6379" } })).toEqual([
      expect.stringMatching(/^action_cable\.redis_url: must not contain credentials/),
    ]);
    expect(issues({ action_cable: { redis_url: "http://cable-redis" } })).toEqual([
      expect.stringMatching(/^action_cable\.redis_url: expected a redis\/rediss URL/),
    ]);
  });
});
