import type { HandshakeRequest } from "../../../lib/tunnel/index.ts";
import { HandshakeRejection } from "../../../lib/tunnel/index.ts";
import type { AgentIdentity } from "../../../modules/runtime/kas.ts";
import { podFromHeaders } from "../../../tool/agent-headers.ts";
import { AgentToken, tokenFingerprint } from "../../../tool/agent-token.ts";
import { AgentAuthError, type AgentAuthErrorCode } from "./errors.ts";
import type { AgentAuthenticator } from "./types.ts";

export type { AgentIdentity } from "../../../modules/runtime/kas.ts";

export interface AgentAuthenticateOptions {
  authenticator: AgentAuthenticator;
  /** Told every outcome, for metrics ("ok" or the error code). */
  onResult?: (result: "ok" | AgentAuthErrorCode) => void;
  log?: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
}

/** Agent tokens are ~50 characters; a bound keeps absurd headers away from hashing and from GitLab. */
const BEARER = /^Bearer[ \t]+([\x21-\x7e]{1,1024})[ \t]*$/i;

/**
 * The agent listener's `authenticate` hook: reads `Authorization: Bearer <token>`, asks the
 * authenticator, and refuses the WebSocket handshake with 401/403/404/503 and a message that
 * never contains the token.
 */
export function createAgentAuthenticate(options: AgentAuthenticateOptions) {
  const { authenticator, onResult, log } = options;
  return async (request: HandshakeRequest, context: { signal: AbortSignal }): Promise<AgentIdentity> => {
    const token = bearerToken(request.headers.authorization);
    if (token === undefined) {
      onResult?.("unauthenticated");
      throw new HandshakeRejection(401, 'expected "Authorization: Bearer <agent token>"', {
        "www-authenticate": 'Bearer realm="gitlab-agent"',
      });
    }
    try {
      const info = await authenticator.authenticateAgent(token, { signal: context.signal });
      onResult?.("ok");
      const pod = podFromHeaders(request.headers);
      return { ...info, token: new AgentToken(token), ...(Object.keys(pod).length > 0 && { pod }) };
    } catch (err) {
      if (context.signal.aborted) throw err; // the handshake is gone; the listener answers timeouts itself
      const error = AgentAuthError.from(err);
      onResult?.(error.code);
      const cause = error.causeText(token);
      const fields = {
        tokenFingerprint: tokenFingerprint(token),
        code: error.code,
        remoteAddress: request.remoteAddress,
        ...(cause !== undefined && { cause }),
      };
      if (error.definitive) log?.info({ ...fields, reason: error.message }, "agent refused");
      else log?.warn({ ...fields, reason: error.message }, "agent authentication unavailable");
      const headers: Record<string, string> = error.code === "unavailable" ? { "retry-after": "5" } : {};
      throw new HandshakeRejection(error.httpStatus, error.message, headers);
    }
  };
}

/** The token of `Bearer <token>`, or undefined for a missing or malformed header. */
export function bearerToken(header: string | string[] | undefined): string | undefined {
  if (typeof header !== "string") return undefined;
  return BEARER.exec(header)?.[1];
}
