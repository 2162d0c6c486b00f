import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { Agent, type Dispatcher, request } from "undici";
import { Backoff, type BackoffOptions } from "../../../lib/tunnel/index.ts";
import { parseAgentInfoResponse } from "./agent-info.ts";
import { AgentAuthError } from "./errors.ts";
import { KAS_API_REQUEST_HEADER, signKasApiJwt } from "./kas-jwt.ts";
import type { AgentAuthenticator, AgentInfo, AuthenticateOptions } from "./types.ts";

export const AGENT_INFO_PATH = "/api/v4/internal/kubernetes/agent_info";

/** What the authenticator needs to log; a pino logger fits. */
export interface AuthLog {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface GitLabAuthenticatorOptions {
  /** GitLab's base URL, e.g. "https://gitlab.example.com" or with a relative root "https://example.com/gitlab". */
  gitlabUrl: string;
  /** The 32-byte secret shared with GitLab (gitlab.authentication_secret_file). */
  secret: Uint8Array;
  /** Extra CA certificate(s), PEM file, for an https GitLab with a private CA. */
  caFile?: string;
  /** One attempt. Default 5 s. */
  requestTimeoutMs?: number;
  /** All attempts together. Default 8 s. */
  retryDeadlineMs?: number;
  /** Attempts at most. Default 4. */
  maxAttempts?: number;
  /** Delays between attempts. Default 100 ms doubling up to 1 s. */
  backoff?: BackoffOptions;
  /** Largest response body read. Default 1 MiB. */
  maxBodyBytes?: number;
  /** Default: an undici Agent of its own (closed by {@link GitLabAuthenticator.close}). */
  dispatcher?: Dispatcher;
  log?: AuthLog;
  userAgent?: string;
}

/** The client settings of the `gitlab` section: GitLab's URL, CA, timeouts; the shared secret. */
export function gitlabClientOptions(
  gitlab: {
    address: string;
    caCertificateFile?: string | undefined;
    requestTimeoutMs: number;
    retryDeadlineMs: number;
  },
  secret: Uint8Array,
  log?: AuthLog,
): GitLabAuthenticatorOptions {
  return {
    gitlabUrl: gitlab.address,
    secret,
    ...(gitlab.caCertificateFile !== undefined && { caFile: gitlab.caCertificateFile }),
    requestTimeoutMs: gitlab.requestTimeoutMs,
    retryDeadlineMs: gitlab.retryDeadlineMs,
    ...(log && { log }),
  };
}

/** One request to GitLab's API (kas's JWT is added). */
export interface GitLabCall {
  method: "GET" | "POST";
  /** From GitLab's root, e.g. "/api/v4/job/allowed_agents". */
  path: string;
  query?: Record<string, string>;
  /** Credentials of whom kas asks about (lowercase names). */
  headers: Record<string, string>;
  /** A body, sent as JSON. */
  json?: unknown;
}

/** How one internal API endpoint's refusals read (401 is also how GitLab refuses kas's own JWT). */
export interface InternalApiRefusals {
  /** The endpoint, for logs: "agent_info", "project_info". */
  what: string;
  /** 401: the agent token is not known (GitLab's detail is not shown). */
  unauthenticated: string;
  /** 403, followed by GitLab's detail. */
  forbidden: string;
  /** 404, followed by GitLab's detail. */
  notFound: string;
}

/**
 * GitLab's internal API (`/api/v4/internal/kubernetes/...`) as kas calls it with an agent's token:
 * `Authorization: Bearer <agent token>` and kas's own JWT in `Gitlab-Kas-Api-Request`. 401/403/404
 * are answers (AgentAuthError unauthenticated / permission_denied / not_found); everything else
 * (5xx, network, timeouts, bodies of the wrong shape) is `unavailable` and retried with backoff
 * until the deadline. Shared by the agent authentication and the project access lookups.
 */
export class GitLabInternalApi {
  readonly #base: URL;
  /** GitLab's relative URL root without a trailing slash ("" at the root). */
  readonly #basePath: string;
  readonly #secret: Uint8Array;
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;
  readonly #requestTimeoutMs: number;
  readonly #retryDeadlineMs: number;
  readonly #maxAttempts: number;
  readonly #backoff: BackoffOptions;
  readonly #maxBodyBytes: number;
  readonly #log: AuthLog | undefined;
  readonly #userAgent: string;

  constructor(options: GitLabAuthenticatorOptions) {
    this.#base = new URL(options.gitlabUrl);
    this.#basePath = this.#base.pathname.replace(/\/+$/, "");
    this.#base.search = "";
    if (options.secret.length === 0) throw new RangeError("GitLabAuthenticator: empty secret");
    this.#secret = options.secret;
    this.#requestTimeoutMs = options.requestTimeoutMs ?? 5000;
    this.#retryDeadlineMs = options.retryDeadlineMs ?? 8000;
    this.#maxAttempts = options.maxAttempts ?? 4;
    this.#backoff = { initialMs: 100, maxMs: 1000, factor: 2, ...options.backoff };
    this.#maxBodyBytes = options.maxBodyBytes ?? 1 << 20;
    this.#log = options.log;
    this.#userAgent = options.userAgent ?? "gitlab-kas-ts";
    this.#ownsDispatcher = options.dispatcher === undefined;
    this.#dispatcher =
      options.dispatcher ??
      new Agent({
        connect: {
          timeout: this.#requestTimeoutMs,
          ...(options.caFile !== undefined && { ca: readFileSync(options.caFile, "utf8") }),
        },
        headersTimeout: this.#requestTimeoutMs,
        bodyTimeout: this.#requestTimeoutMs,
      });
  }

  /**
   * `GET <gitlab><path>?<query>` with the agent's token; a 200's JSON body goes to `parse` (which
   * throws an `unavailable` AgentAuthError for a body of the wrong shape).
   */
  get<T>(
    path: string,
    query: Record<string, string>,
    token: string,
    refusals: InternalApiRefusals,
    parse: (json: unknown) => T,
    signal?: AbortSignal,
  ): Promise<T> {
    return this.call(
      { method: "GET", path, query, headers: { authorization: `Bearer ${token}` } },
      refusals,
      parse,
      signal,
    );
  }

  /**
   * One request to GitLab with kas's JWT (and `call.headers`, e.g. a job's `Job-Token`; a `json`
   * body is sent as JSON), retried as {@link get}.
   */
  async call<T>(
    call: GitLabCall,
    refusals: InternalApiRefusals,
    parse: (json: unknown) => T,
    signal?: AbortSignal,
  ): Promise<T> {
    const url = new URL(this.#base.href);
    url.pathname = `${this.#basePath}${call.path}`;
    for (const [k, v] of Object.entries(call.query ?? {})) url.searchParams.set(k, v);
    const deadline = Date.now() + this.#retryDeadlineMs;
    const backoff = new Backoff(this.#backoff);
    for (let attempt = 1; ; attempt++) {
      signal?.throwIfAborted();
      const remaining = deadline - Date.now();
      try {
        const { status, body } = await this.#attempt(
          url.href,
          call,
          Math.min(this.#requestTimeoutMs, remaining),
          signal,
        );
        return this.#interpret(status, body, refusals, parse);
      } catch (err) {
        if (!(err instanceof AgentAuthError) || err.definitive || signal?.aborted) throw err;
        const delay = backoff.next();
        const exhausted = attempt >= this.#maxAttempts || Date.now() + delay >= deadline;
        this.#log?.warn(
          { err: err.message, attempt, ...(!exhausted && { retryInMs: delay }) },
          exhausted
            ? `GitLab ${refusals.what} failed, giving up`
            : `GitLab ${refusals.what} failed, retrying`,
        );
        if (exhausted) throw err;
        await sleep(delay, undefined, signal ? { signal } : {});
      }
    }
  }

  async #attempt(
    url: string,
    call: GitLabCall,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<{ status: number; body: string }> {
    const timeout = AbortSignal.timeout(Math.max(1, timeoutMs));
    let response: Dispatcher.ResponseData;
    try {
      response = await request(url, {
        method: call.method,
        dispatcher: this.#dispatcher,
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
        headers: {
          ...call.headers,
          [KAS_API_REQUEST_HEADER.toLowerCase()]: await signKasApiJwt(this.#secret),
          accept: "application/json",
          "user-agent": this.#userAgent,
          ...(call.json !== undefined && { "content-type": "application/json" }),
        },
        ...(call.json !== undefined && { body: JSON.stringify(call.json) }),
      });
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      const why = timeout.aborted ? `no answer within ${timeoutMs} ms` : describeNetworkError(err);
      throw new AgentAuthError("unavailable", `GitLab is unreachable: ${why}`, { cause: err });
    }
    const body = await this.#readBody(response, signal, timeout);
    return { status: response.statusCode, body };
  }

  async #readBody(response: Dispatcher.ResponseData, signal: AbortSignal | undefined, timeout: AbortSignal) {
    try {
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > this.#maxBodyBytes) {
          response.body.destroy();
          throw new AgentAuthError(
            "unavailable",
            `GitLab's answer is larger than ${this.#maxBodyBytes} bytes`,
          );
        }
        chunks.push(chunk);
      }
      return Buffer.concat(chunks).toString("utf8");
    } catch (err) {
      if (err instanceof AgentAuthError) throw err;
      if (signal?.aborted) throw signal.reason;
      const why = timeout.aborted ? "timed out reading the answer" : describeNetworkError(err);
      throw new AgentAuthError("unavailable", `GitLab is unreachable: ${why}`, { cause: err });
    }
  }

  #interpret<T>(status: number, body: string, refusals: InternalApiRefusals, parse: (json: unknown) => T): T {
    const detail = gitlabMessage(body);
    switch (status) {
      case 200: {
        let json: unknown;
        try {
          json = JSON.parse(body);
        } catch {
          throw new AgentAuthError(
            "unavailable",
            `GitLab returned an ${refusals.what} response that is not JSON`,
          );
        }
        return parse(json);
      }
      case 401:
        if (/KAS JWT/i.test(detail)) {
          // GitLab refused kas itself, not the agent: every agent would be refused. Say so loudly.
          this.#log?.error(
            { gitlabMessage: detail },
            "GitLab rejected kas's JWT: gitlab.authentication_secret_file must hold the same secret as GitLab's gitlab_kas secret",
          );
          throw new AgentAuthError(
            "unavailable",
            "kas cannot authenticate to GitLab (shared secret mismatch)",
          );
        }
        throw new AgentAuthError("unauthenticated", refusals.unauthenticated);
      case 403:
        throw new AgentAuthError("permission_denied", `${refusals.forbidden}${suffix(detail)}`);
      case 404:
        throw new AgentAuthError("not_found", `${refusals.notFound}${suffix(detail)}`);
      default:
        throw new AgentAuthError("unavailable", `GitLab answered HTTP ${status}${suffix(detail)}`);
    }
  }

  /** Closes the connection pool if this client created it. */
  async close(): Promise<void> {
    if (this.#ownsDispatcher) await this.#dispatcher.close();
  }
}

const AGENT_INFO_REFUSALS: InternalApiRefusals = {
  what: "agent_info",
  unauthenticated: "agent token is invalid or revoked",
  forbidden: "GitLab refused the agent token",
  notFound: "agent not found",
};

/**
 * Authenticates agent tokens against GitLab's internal API: `GET /api/v4/internal/kubernetes/agent_info`
 * with the agent's token as `Authorization: Bearer` and kas's own JWT in `Gitlab-Kas-Api-Request`.
 * 401/403/404 are answers; everything else (5xx, network, timeouts, bodies of the wrong shape) is
 * `unavailable` and retried with backoff until the deadline. No caching here: see CachedAuthenticator.
 */
export class GitLabAuthenticator implements AgentAuthenticator {
  readonly #api: GitLabInternalApi;

  constructor(options: GitLabAuthenticatorOptions) {
    this.#api = new GitLabInternalApi(options);
  }

  authenticateAgent(token: string, options: AuthenticateOptions = {}): Promise<AgentInfo> {
    return this.#api.get(
      AGENT_INFO_PATH,
      {},
      token,
      AGENT_INFO_REFUSALS,
      parseAgentInfoResponse,
      options.signal,
    );
  }

  /** Closes the connection pool if this authenticator created it. */
  close(): Promise<void> {
    return this.#api.close();
  }
}

/** GitLab's API errors are `{"message": "..."}`; anything else is not shown (it could echo a header). */
function gitlabMessage(body: string): string {
  try {
    const message = (JSON.parse(body) as { message?: unknown }).message;
    if (typeof message === "string") return message.slice(0, 200).replace(/[^\x20-\x7e]/g, "?");
  } catch {}
  return "";
}

function suffix(detail: string): string {
  return detail ? `: ${detail}` : "";
}

function describeNetworkError(err: unknown): string {
  const e = err as { code?: string; message?: string; cause?: { code?: string } };
  return e.cause?.code ?? e.code ?? e.message ?? String(err);
}
