// `POST /api/v4/internal/kubernetes/usage_metrics` as Rails takes it (API::Internal::Kubernetes,
// AgentHelpers#increment_count_events / #increment_unique_events): kas's JWT first (401), Grape's
// validation of the body (`counters`: a hash of integers, `unique_counters`: a hash of integer
// arrays), then only the event names Rails counts (others are dropped silently, as
// `params[...].slice` does), a negative count refused (KubernetesAgentCounter's ArgumentError: 400).
// GitLab answers 204. The GitLab API test server (gitlab-api.ts) routes the path here.
import { EventEmitter, once } from "node:events";
import type { IncomingMessage, ServerResponse } from "node:http";
import { readBody } from "./read-body.ts";

export const USAGE_METRICS_PATH = "/api/v4/internal/kubernetes/usage_metrics";

/** Counters Rails increments (`increment_count_events`' slice). */
export const USAGE_COUNTERS = [
  "gitops_sync",
  "k8s_api_proxy_request",
  "flux_git_push_notifications_total",
  "k8s_api_proxy_requests_via_ci_access",
  "k8s_api_proxy_requests_via_user_access",
  "k8s_api_proxy_requests_via_pat_access",
] as const;

/** Unique counters Rails records (`increment_unique_events`' slice): ids of users, agents, projects. */
export const USAGE_UNIQUE_COUNTERS = [
  "agent_users_using_ci_tunnel",
  "k8s_api_proxy_requests_unique_users_via_ci_access",
  "k8s_api_proxy_requests_unique_agents_via_ci_access",
  "k8s_api_proxy_requests_unique_users_via_user_access",
  "k8s_api_proxy_requests_unique_agents_via_user_access",
  "k8s_api_proxy_requests_unique_users_via_pat_access",
  "k8s_api_proxy_requests_unique_agents_via_pat_access",
  "flux_git_push_notified_unique_projects",
] as const;

/** One usage_metrics post GitLab took: what it counted. */
export interface UsageMetrics {
  counters: Record<string, number>;
  uniqueCounters: Record<string, number[]>;
}

/** Grape's Integer: an integer, or a string of one (Grape coerces it). */
function integer(value: unknown): number | undefined {
  if (typeof value === "number" && Number.isSafeInteger(value)) return value;
  if (typeof value === "string" && /^-?\d+$/.test(value) && Number.isSafeInteger(Number(value)))
    return Number(value);
  return undefined;
}

const isHash = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** The body read as Rails reads it: what it counts, or its 400 answer. */
export function readUsageMetrics(
  body: unknown,
): { ok: true; metrics: UsageMetrics } | { ok: false; error: unknown } {
  const invalid = (field: string) => ({ ok: false as const, error: { error: `${field} is invalid` } });
  if (!isHash(body)) return invalid("counters");
  const metrics: UsageMetrics = { counters: {}, uniqueCounters: {} };
  const { counters, unique_counters: unique } = body;
  if (counters != null) {
    if (!isHash(counters)) return invalid("counters");
    for (const name of USAGE_COUNTERS) {
      if (counters[name] == null) continue;
      const n = integer(counters[name]);
      if (n === undefined) return invalid(`counters[${name}]`);
      if (n < 0)
        return {
          ok: false,
          error: { message: `400 Bad request - ${name} count must be greater than or equal to zero` },
        };
      metrics.counters[name] = n;
    }
  }
  if (unique != null) {
    if (!isHash(unique)) return invalid("unique_counters");
    for (const name of USAGE_UNIQUE_COUNTERS) {
      const list = unique[name];
      if (list == null) continue;
      const ids = Array.isArray(list) ? list.map(integer) : [undefined];
      if (ids.some((id) => id === undefined)) return invalid(`unique_counters[${name}]`);
      metrics.uniqueCounters[name] = ids as number[];
    }
  }
  return { ok: true, metrics };
}

export class GitLabUsageMetrics {
  /** Reports taken, in order. */
  readonly posts: UsageMetrics[] = [];
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
      const text = await readBody(req, 1 << 20);
      body = text === "" ? {} : JSON.parse(text);
    } catch {
      return [400, { message: "400 Bad request - body is not JSON" }];
    }
    seen(body);
    const fault = this.#faults.shift();
    if (fault !== undefined) return [fault, { message: `${fault} fault` }];
    const read = readUsageMetrics(body);
    if (!read.ok) return [400, read.error];
    this.posts.push(read.metrics);
    return [204, undefined];
  }
}
