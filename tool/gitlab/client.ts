// GitLab's REST API as kas calls it: GitLab's base URL (a relative URL root included), kas's own
// JWT on every request, retries with backoff within a deadline, GitLab's refusals read into a
// GitLabError. The endpoints are one file each beside this one; they describe their request and
// read their answer, this file carries them.
import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { Agent, type Dispatcher, request } from "undici";
import { Backoff, type BackoffOptions } from "../../lib/tunnel/index.ts";
import { kasUserAgent } from "../version.ts";
import { GitLabError } from "./errors.ts";
import { KAS_API_REQUEST_HEADER, signKasApiJwt } from "./kas-jwt.ts";

/** What the client logs; a pino logger fits. */
export interface GitLabLog {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface GitLabClientOptions {
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
  /** Default: an undici Agent of its own (closed by {@link GitLabClient.close}). */
  dispatcher?: Dispatcher;
  log?: GitLabLog;
  /** Default `gitlab-kas/<version>/<commit>`, GitLab's kas's form. */
  userAgent?: string;
}

/** How one endpoint's refusals read (401 is also how GitLab refuses kas's own JWT). */
export interface GitLabRefusals {
  /** The endpoint, for logs and messages: "agent_info", "project_info". */
  what: string;
  /** 401: the credentials asked about are not known (GitLab's detail is not shown). */
  unauthenticated: string;
  /** 403, followed by GitLab's detail. */
  forbidden: string;
  /** 404, followed by GitLab's detail. */
  notFound: string;
  /**
   * 400, followed by GitLab's detail, where the endpoint answers 400 for credentials it cannot
   * read (authorize_proxy_user: "Unable to get user from request data" for an unknown personal
   * access token): `unauthenticated`, an answer, not retried. Absent: 400 is `unavailable`.
   */
  badRequest?: string;
}

/** One request to GitLab's API (kas's JWT is added), and how its answer reads. */
export interface GitLabRequest<T> {
  method: "GET" | "POST";
  /** From GitLab's root, e.g. "/api/v4/job/allowed_agents". */
  path: string;
  query?: Record<string, string>;
  /** Credentials of whom kas asks about (lowercase names), e.g. `authorization`, `job-token`. */
  headers: Record<string, string>;
  /** A body, sent as JSON. */
  json?: unknown;
  /** A body already written as JSON (e.g. int64 ids kept exact); instead of `json`. */
  jsonText?: string;
  /**
   * One attempt, never retried: the caller tries again later by itself (usage_metrics, as GitLab's
   * kas's `WithoutRetries`).
   */
  once?: boolean;
  refusals: GitLabRefusals;
  /**
   * Reads a 200's JSON body (a 204's: `undefined`); throws an `unavailable` GitLabError (see
   * Reader) for one of the wrong shape.
   */
  parse: (json: unknown) => T;
}

/**
 * GitLab's API as kas calls it, with kas's own JWT in `Gitlab-Kas-Api-Request`. 401/403/404 are
 * answers (GitLabError unauthenticated / forbidden / not_found), and 400 where the endpoint says so
 * (GitLabRefusals.badRequest); everything else (5xx, network,
 * timeouts, bodies of the wrong shape) is `unavailable` and retried with backoff until the deadline.
 */
export class GitLabClient {
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
  readonly #log: GitLabLog | undefined;
  readonly #userAgent: string;

  constructor(options: GitLabClientOptions) {
    this.#base = new URL(options.gitlabUrl);
    this.#basePath = this.#base.pathname.replace(/\/+$/, "");
    this.#base.search = "";
    if (options.secret.length === 0) throw new RangeError("GitLabClient: empty secret");
    this.#secret = options.secret;
    this.#requestTimeoutMs = options.requestTimeoutMs ?? 5000;
    this.#retryDeadlineMs = options.retryDeadlineMs ?? 8000;
    this.#maxAttempts = options.maxAttempts ?? 4;
    this.#backoff = { initialMs: 100, maxMs: 1000, factor: 2, ...options.backoff };
    this.#maxBodyBytes = options.maxBodyBytes ?? 1 << 20;
    this.#log = options.log;
    this.#userAgent = options.userAgent ?? kasUserAgent();
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
   * One request to GitLab with kas's JWT (and `req.headers`, e.g. an agent's `Authorization` or a
   * job's `Job-Token`; a `json` body is sent as JSON), retried while it fails `unavailable`.
   * Rejects with a GitLabError, or with `signal`'s reason once it aborts.
   */
  async request<T>(req: GitLabRequest<T>, signal?: AbortSignal): Promise<T> {
    const url = new URL(this.#base.href);
    url.pathname = `${this.#basePath}${req.path}`;
    for (const [k, v] of Object.entries(req.query ?? {})) url.searchParams.set(k, v);
    const deadline = Date.now() + this.#retryDeadlineMs;
    const backoff = new Backoff(this.#backoff);
    for (let attempt = 1; ; attempt++) {
      signal?.throwIfAborted();
      const remaining = deadline - Date.now();
      try {
        const { status, body } = await this.#attempt(
          url.href,
          req,
          Math.min(this.#requestTimeoutMs, remaining),
          signal,
        );
        return this.#interpret(status, body, req);
      } catch (err) {
        if (!(err instanceof GitLabError) || !err.retryable || req.once || signal?.aborted) throw err;
        const delay = backoff.next();
        const exhausted = attempt >= this.#maxAttempts || Date.now() + delay >= deadline;
        const { what } = req.refusals;
        this.#log?.warn(
          { err: err.message, attempt, ...(!exhausted && { retryInMs: delay }) },
          exhausted ? `GitLab ${what} failed, giving up` : `GitLab ${what} failed, retrying`,
        );
        if (exhausted) throw err;
        await sleep(delay, undefined, signal ? { signal } : {});
      }
    }
  }

  async #attempt(
    url: string,
    req: GitLabRequest<unknown>,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<{ status: number; body: string }> {
    const timeout = AbortSignal.timeout(Math.max(1, timeoutMs));
    const payload = req.jsonText ?? (req.json !== undefined ? JSON.stringify(req.json) : undefined);
    let response: Dispatcher.ResponseData;
    try {
      response = await request(url, {
        method: req.method,
        dispatcher: this.#dispatcher,
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
        headers: {
          ...req.headers,
          [KAS_API_REQUEST_HEADER.toLowerCase()]: await signKasApiJwt(this.#secret),
          accept: "application/json",
          "user-agent": this.#userAgent,
          ...(payload !== undefined && { "content-type": "application/json" }),
        },
        ...(payload !== undefined && { body: payload }),
      });
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      const why = timeout.aborted ? `no answer within ${timeoutMs} ms` : describeNetworkError(err);
      throw new GitLabError("unavailable", `GitLab is unreachable: ${why}`, { cause: err });
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
          throw new GitLabError("unavailable", `GitLab's answer is larger than ${this.#maxBodyBytes} bytes`, {
            status: response.statusCode,
          });
        }
        chunks.push(chunk);
      }
      return Buffer.concat(chunks).toString("utf8");
    } catch (err) {
      if (err instanceof GitLabError) throw err;
      if (signal?.aborted) throw signal.reason;
      const why = timeout.aborted ? "timed out reading the answer" : describeNetworkError(err);
      throw new GitLabError("unavailable", `GitLab is unreachable: ${why}`, { cause: err });
    }
  }

  #interpret<T>(status: number, body: string, req: GitLabRequest<T>): T {
    const { refusals } = req;
    const gitlabMessage = gitlabMessageOf(body);
    const answered = { status, gitlabMessage };
    switch (status) {
      case 200: {
        let json: unknown;
        try {
          json = JSON.parse(body);
        } catch {
          throw new GitLabError(
            "unavailable",
            `GitLab returned an ${refusals.what} response that is not JSON`,
          );
        }
        return req.parse(json);
      }
      case 204:
        // No content (e.g. agent_configuration): the endpoint's parser says whether that is an answer.
        return req.parse(undefined);
      case 401:
        if (/KAS JWT/i.test(gitlabMessage)) {
          // GitLab refused kas itself, not whom kas asked about: every answer would be a refusal. Say so loudly.
          this.#log?.error(
            { gitlabMessage },
            "GitLab rejected kas's JWT: gitlab.authentication_secret_file must hold the same secret as GitLab's gitlab_kas secret",
          );
          throw new GitLabError(
            "unavailable",
            "kas cannot authenticate to GitLab (shared secret mismatch)",
            answered,
          );
        }
        throw new GitLabError("unauthenticated", refusals.unauthenticated, answered);
      case 400:
        if (refusals.badRequest === undefined) break;
        throw new GitLabError("unauthenticated", `${refusals.badRequest}${suffix(gitlabMessage)}`, answered);
      case 403:
        throw new GitLabError("forbidden", `${refusals.forbidden}${suffix(gitlabMessage)}`, answered);
      case 404:
        throw new GitLabError("not_found", `${refusals.notFound}${suffix(gitlabMessage)}`, answered);
    }
    throw new GitLabError("unavailable", `GitLab answered HTTP ${status}${suffix(gitlabMessage)}`, answered);
  }

  /** Closes the connection pool if this client created it. */
  async close(): Promise<void> {
    if (this.#ownsDispatcher) await this.#dispatcher.close();
  }
}

/** An agent's token, as GitLab's internal API (`/api/v4/internal/kubernetes/...`) takes it. */
export function agentTokenHeaders(agentToken: string): Record<string, string> {
  return { authorization: `Bearer ${agentToken}` };
}

/** GitLab's API errors are `{"message": "..."}`; anything else is not shown (it could echo a header). */
function gitlabMessageOf(body: string): string {
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
