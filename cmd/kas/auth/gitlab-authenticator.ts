import {
  GitLabClient,
  type GitLabClientOptions,
  GitLabError,
  type GitLabErrorKind,
  type GitLabLog,
  getAgentInfo,
} from "../../../tool/gitlab/index.ts";
import { AgentAuthError, type AgentAuthErrorCode } from "./errors.ts";
import type { AgentAuthenticator, AgentInfo, AuthenticateOptions } from "./types.ts";

/** What the authentication logs; a pino logger fits. */
export type AuthLog = GitLabLog;

/** A client of its own: GitLab's URL, the shared secret, timeouts (see GitLabClientOptions). */
export type GitLabAuthenticatorOptions = GitLabClientOptions;

const CODES: Record<GitLabErrorKind, AgentAuthErrorCode> = {
  unauthenticated: "unauthenticated",
  forbidden: "permission_denied",
  not_found: "not_found",
  unavailable: "unavailable",
};

/** GitLab's refusal (or failure to answer) as the agent's handshake answers it; the message is GitLab's client's. */
function agentAuthErrorOf(err: GitLabError): AgentAuthError {
  return new AgentAuthError(CODES[err.kind], err.message, { cause: err });
}

/**
 * Authenticates agent tokens against GitLab's internal API: `agent_info` (tool/gitlab) with the
 * agent's token. 401/403/404 are answers; everything else (5xx, network, timeouts, bodies of the
 * wrong shape) is `unavailable`, retried by the client until its deadline. No caching here: see
 * CachedAuthenticator.
 */
export class GitLabAuthenticator implements AgentAuthenticator {
  readonly #client: GitLabClient;
  readonly #ownsClient: boolean;

  /** `client`: shared (the caller closes it), or the options of one of its own (closed by {@link close}). */
  constructor(client: GitLabClient | GitLabAuthenticatorOptions) {
    this.#ownsClient = !(client instanceof GitLabClient);
    this.#client = client instanceof GitLabClient ? client : new GitLabClient(client);
  }

  authenticateAgent(token: string, options: AuthenticateOptions = {}): Promise<AgentInfo> {
    return getAgentInfo(this.#client, token, options.signal).catch((err: unknown) => {
      throw err instanceof GitLabError ? agentAuthErrorOf(err) : err;
    });
  }

  /** Closes the client if this authenticator created it. */
  async close(): Promise<void> {
    if (this.#ownsClient) await this.#client.close();
  }
}
