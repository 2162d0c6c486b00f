// usage_metrics on its own, against the GitLab API test server: the body as GitLab's kas marshals
// it (empty maps left out, int64 ids as JSON numbers written exactly), kas's JWT, GitLab's 204, one
// attempt only (a 500 is the caller's to retry, with its next report); and the test server
// answering as Rails 16.5 does (400 for what Grape refuses, names it does not know ignored).
import { randomBytes } from "node:crypto";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  GitLabClient,
  GitLabError,
  postUsageMetrics,
  signKasApiJwt,
  USAGE_METRICS_PATH,
  usageMetricsBody,
} from "../../../tool/gitlab/index.ts";
import { GitLabApiServer } from "../../support/gitlab-api.ts";

let secret: Uint8Array;
let gitlab: GitLabApiServer;
let client: GitLabClient;

beforeAll(async () => {
  secret = new Uint8Array(randomBytes(32));
  gitlab = await GitLabApiServer.start({ secret });
  client = new GitLabClient({ gitlabUrl: gitlab.url, secret, maxAttempts: 4, backoff: { initialMs: 5 } });
});
afterAll(async () => {
  await client?.close();
  await gitlab?.close();
});

describe("usageMetricsBody", () => {
  test("GitLab kas's UsagePingData: omitempty maps, ids as exact JSON numbers", () => {
    expect(usageMetricsBody({ counters: {}, uniqueCounters: {} })).toBe("{}");
    expect(usageMetricsBody({ counters: { gitops_sync: 2 }, uniqueCounters: {} })).toBe(
      '{"counters":{"gitops_sync":2}}',
    );
    const big = "9223372036854775807"; // 2^63-1: beyond 2^53, kept digit for digit
    expect(
      usageMetricsBody({ counters: {}, uniqueCounters: { agent_users_using_ci_tunnel: ["5", big] } }),
    ).toBe(`{"unique_counters":{"agent_users_using_ci_tunnel":[5,${big}]}}`);
  });

  test("what GitLab could not take is never written: bad names, counts, ids", () => {
    expect(() => usageMetricsBody({ counters: { 'a"b': 1 }, uniqueCounters: {} })).toThrow(RangeError);
    expect(() => usageMetricsBody({ counters: { a: -1 }, uniqueCounters: {} })).toThrow(RangeError);
    expect(() => usageMetricsBody({ counters: { a: 1.5 }, uniqueCounters: {} })).toThrow(RangeError);
    expect(() => usageMetricsBody({ counters: {}, uniqueCounters: { a: ["1]"] } })).toThrow(RangeError);
    expect(() => usageMetricsBody({ counters: {}, uniqueCounters: { a: ["0"] } })).toThrow(RangeError);
  });

  test("property: any valid report reads back as JSON with the same counts and ids", () => {
    const name = fc.stringMatching(/^[a-z0-9_]{1,20}$/);
    const id = fc.bigInt({ min: 1n, max: 2n ** 63n - 1n }).map(String);
    fc.assert(
      fc.property(
        fc.dictionary(name, fc.nat()),
        fc.dictionary(name, fc.array(id, { maxLength: 5 })),
        (counters, uniqueCounters) => {
          const text = usageMetricsBody({ counters, uniqueCounters });
          const read = JSON.parse(text) as { counters?: object; unique_counters?: Record<string, unknown[]> };
          expect(read.counters ?? {}).toEqual(counters);
          expect(Object.keys(read.unique_counters ?? {})).toEqual(Object.keys(uniqueCounters));
          // Each id stands in the text exactly as given (JSON.parse would round those beyond 2^53).
          for (const [n, ids] of Object.entries(uniqueCounters))
            expect(text).toContain(`"${n}":[${ids.join(",")}]`);
        },
      ),
    );
  });
});

describe("postUsageMetrics", () => {
  test("POST with kas's JWT; GitLab answers 204 and counts what it knows", async () => {
    await postUsageMetrics(client, {
      counters: { k8s_api_proxy_request: 3, not_a_gitlab_counter: 9 },
      uniqueCounters: { agent_users_using_ci_tunnel: ["5", "11"] },
    });
    const request = gitlab.requests.at(-1)!;
    expect(request).toMatchObject({ method: "POST", path: USAGE_METRICS_PATH, status: 204 });
    expect(request.jwt.ok).toBe(true);
    // Rails slices the names it knows.
    expect(gitlab.usageMetrics.posts.at(-1)).toEqual({
      counters: { k8s_api_proxy_request: 3 },
      uniqueCounters: { agent_users_using_ci_tunnel: [5, 11] },
    });
  });

  test("one attempt: GitLab's 500 rejects at once (no retry), as GitLab's kas's WithoutRetries", async () => {
    const before = gitlab.usageMetrics.attempts.length;
    gitlab.usageMetrics.failNext(1, 500);
    const err = await postUsageMetrics(client, { counters: { gitops_sync: 1 }, uniqueCounters: {} }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(GitLabError);
    expect(err).toMatchObject({ kind: "unavailable", status: 500 });
    expect(gitlab.usageMetrics.attempts.length - before).toBe(1);
  });

  test("a report that cannot be written is refused before anything is sent", async () => {
    const before = gitlab.requests.length;
    await expect(
      postUsageMetrics(client, { counters: { gitops_sync: -1 }, uniqueCounters: {} }),
    ).rejects.toThrow(RangeError);
    expect(gitlab.requests.length).toBe(before);
  });
});

describe("the test server answers as Rails 16.5", () => {
  const post = async (body: string, jwt = true) => {
    const res = await fetch(`${gitlab.url}${USAGE_METRICS_PATH}`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(jwt && { "gitlab-kas-api-request": await signKasApiJwt(secret) }),
      },
      body,
    });
    return { status: res.status, body: await res.text() };
  };

  test("401 without kas's JWT; 400 for what Grape refuses or a negative count; unknown names ignored", async () => {
    const taken = gitlab.usageMetrics.posts.length;
    expect((await post('{"counters":{"gitops_sync":1}}', false)).status).toBe(401);
    expect(await post('{"counters":[]}')).toEqual({ status: 400, body: '{"error":"counters is invalid"}' });
    expect((await post('{"counters":{"gitops_sync":"x"}}')).body).toContain(
      "counters[gitops_sync] is invalid",
    );
    expect((await post('{"unique_counters":{"agent_users_using_ci_tunnel":[1.5]}}')).body).toContain(
      "unique_counters[agent_users_using_ci_tunnel] is invalid",
    );
    const negative = await post('{"counters":{"gitops_sync":-1}}');
    expect(negative.status).toBe(400);
    expect(negative.body).toContain("gitops_sync count must be greater than or equal to zero");
    expect(gitlab.usageMetrics.posts.length).toBe(taken);
    expect(await post('{"counters":{"unknown":-5}}')).toEqual({ status: 204, body: "" });
    expect(gitlab.usageMetrics.posts.at(-1)).toEqual({ counters: {}, uniqueCounters: {} });
  });
});
