// GitLab's `POST /api/v4/internal/kubernetes/usage_metrics` for the GitLab API test server
// (gitlab-api.ts routes it here), as Rails 16.5 answers it: kas's JWT first (401), Grape's
// validation of `counters` (a Hash of Integer) and `unique_counters` (a Hash of Array[Integer])
// (400 "... is invalid"), a negative count refused as KubernetesAgentCounter does (400), names
// Rails does not know ignored (`params.slice`), then 204. What it took is recorded, by known name
// only, as GitLab would count it.
import { EventEmitter, once } from "node:events";
import type { IncomingMessage, ServerResponse } from "node:http";

export const USAGE_METRICS_PATH = "/api/v4/internal/kubernetes/usage_metrics";

/** Rails' `increment_count_events` slice (GitLab 16.5's lib/api/helpers/kubernetes/agent_helpers.rb). */
export const KNOWN_COUNTERS = [
  "gitops_sync",
  "k8s_api_proxy_request",
  "flux_git_push_notifications_total",
  "k8s_api_proxy_requests_via_ci_access",
  "k8s_api_proxy_requests_via_user_access",
  "k8s_api_proxy_requests_via_pat_access",
] as const;

/** Rails' `increment_unique_events` slice. */
export const KNOWN_UNIQUE_COUNTERS = [
  "agent_users_using_ci_tunnel",
  "k8s_api_proxy_requests_unique_users_via_ci_access",
  "k8s_api_proxy_requests_unique_agents_via_ci_access",
  "k8s_api_proxy_requests_unique_users_via_user_access",
  "k8s_api_proxy_requests_unique_agents_via_user_access",
  "k8s_api_proxy_requests_unique_users_via_pat_access",
  "k8s_api_proxy_requests_unique_agents_via_pat_access",
  "flux_git_push_notified_unique_projects",
] as const;

/** One report GitLab took (204): the known counters and unique counters it counted. */
export interface UsageMetricsPost {
  counters: Record<string, number>;
  uniqueCounters: Record<string, number[]>;
}

export class GitLabUsageMetrics {
  /** Reports taken, in order. */
  readonly posts: UsageMetricsPost[] = [];
  /** Every POST that reached the endpoint (taken or not), with the status it got. */
  readonly attempts: { status: number; body: unknown }[] = [];
  readonly #faults: number[] = [];
  readonly #events = new EventEmitter();

  /** The next `count` POSTs are answered with `status` (GitLab down: 500, 502, ...), nothing taken. */
  failNext(count: number, status: number): void {
    for (let i = 0; i < count; i++) this.#faults.push(status);
  }

  /** Sum of every counter taken, by name. */
  counters(): Record<string, number> {
    const sum: Record<string, number> = {};
    for (const p of this.posts)
      for (const [name, n] of Object.entries(p.counters)) sum[name] = (sum[name] ?? 0) + n;
    return sum;
  }

  /** Every id taken, by unique counter name (sorted, once each: GitLab's HyperLogLog counts them once). */
  uniqueCounters(): Record<string, number[]> {
    const all = new Map<string, Set<number>>();
    for (const p of this.posts) {
      for (const [name, ids] of Object.entries(p.uniqueCounters)) {
        const set = all.get(name) ?? new Set<number>();
        for (const id of ids) set.add(id);
        all.set(name, set);
      }
    }
    return Object.fromEntries([...all].map(([n, set]) => [n, [...set].sort((a, b) => a - b)]));
  }

  /** Resolves once `predicate` holds after an attempt; rejects after `ms`. */
  async waitFor(predicate: () => boolean, ms: number, what: string): Promise<void> {
    const signal = AbortSignal.timeout(ms);
    while (!predicate()) {
      try {
        await once(this.#events, "attempt", { signal });
      } catch {
        throw new Error(`timed out after ${ms} ms waiting for ${what}`);
      }
    }
  }

  /** Answers one request to the path; `jwtOk`: kas's JWT verified; the status answered goes to `record`. */
  async handle(
    req: IncomingMessage,
    res: ServerResponse,
    jwtOk: boolean,
    record: { status: number },
  ): Promise<void> {
    let body: unknown;
    const status = await this.#answer(req, jwtOk, (b) => {
      body = b;
    });
    const [code, json] = status;
    if (code === 204) res.writeHead(204).end();
    else res.writeHead(code, { "content-type": "application/json" }).end(JSON.stringify(json));
    this.attempts.push({ status: code, body });
    record.status = code;
    this.#events.emit("attempt");
  }

  async #answer(
    req: IncomingMessage,
    jwtOk: boolean,
    seen: (body: unknown) => void,
  ): Promise<[number, unknown]> {
    if (req.method !== "POST") return [405, { message: "405 Method Not Allowed" }];
    if (!jwtOk) return [401, { message: "KAS JWT authentication invalid" }];
    let body: unknown;
    try {
      const text = await readBody(req);
      body = text === "" ? {} : JSON.parse(text);
    } catch {
      return [400, { message: "400 Bad request - body is not JSON" }];
    }
    seen(body);
    const fault = this.#faults.shift();
    if (fault !== undefined) return [fault, { message: `${fault} fault` }];
    const taken = validate(body);
    if (typeof taken === "string") return [400, { error: taken }];
    const negative = Object.entries(taken.counters).find(([, n]) => n < 0);
    if (negative)
      return [
        400,
        { message: `400 Bad request - ${negative[0]} count must be greater than or equal to zero` },
      ];
    this.posts.push(taken);
    return [204, undefined];
  }
}

/** Grape's coercion and validation of the params; a string is its error message. */
function validate(body: unknown): UsageMetricsPost | string {
  if (!isHash(body)) return "counters is invalid, unique_counters is invalid";
  const post: UsageMetricsPost = { counters: {}, uniqueCounters: {} };
  const { counters, unique_counters: unique } = body;
  if (counters !== undefined) {
    if (!isHash(counters)) return "counters is invalid";
    for (const name of KNOWN_COUNTERS) {
      if (!(name in counters)) continue;
      const n = integer(counters[name]);
      if (n === undefined) return `counters[${name}] is invalid`;
      post.counters[name] = n;
    }
  }
  if (unique !== undefined) {
    if (!isHash(unique)) return "unique_counters is invalid";
    for (const name of KNOWN_UNIQUE_COUNTERS) {
      if (!(name in unique)) continue;
      const ids = unique[name];
      const coerced = Array.isArray(ids) ? ids.map(integer) : [undefined];
      if (coerced.some((id) => id === undefined)) return `unique_counters[${name}] is invalid`;
      post.uniqueCounters[name] = coerced as number[];
    }
  }
  return post;
}

function isHash(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Grape's Integer: a JSON integer, or a string of one. */
function integer(v: unknown): number | undefined {
  if (typeof v === "number" && Number.isInteger(v)) return v;
  if (typeof v === "string" && /^-?\d+$/.test(v)) return Number(v);
  return undefined;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > 1 << 20) throw new Error("body too large");
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}
