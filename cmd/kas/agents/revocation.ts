import type { TunnelSession } from "../../../lib/tunnel/index.ts";
import type { AgentAuthError, AgentIdentity, TokenRecheck } from "../auth/index.ts";

/**
 * Why a tunnel was closed: its agent's token was refused on re-check. (The colon matters in log
 * lines: the log scrubber takes the word after "token " for a credential.)
 */
export const TOKEN_NO_LONGER_VALID = "agent token no longer valid";

/**
 * Has the tunnel's token re-checked while it is open; if GitLab refuses it, the tunnel gets GoAway
 * (the agent stops opening streams and redials, to be refused at the handshake) and is closed at
 * once: a revoked token keeps no access for the grace a drain would give.
 */
export function closeOnRevocation(
  session: TunnelSession<AgentIdentity>,
  recheck: Pick<TokenRecheck, "watch">,
  log?: { warn(obj: object, msg: string): void },
): void {
  if (session.closed) return; // gone before it was served: no 'close' would unwatch it
  const { agentId, projectId, token } = session.identity;
  const unwatch = recheck.watch(token, (error: AgentAuthError) => {
    log?.warn(
      {
        agentId,
        projectId,
        tokenFingerprint: token.fingerprint,
        remoteAddress: session.stats.remoteAddress,
        code: error.code,
        reason: error.message,
      },
      TOKEN_NO_LONGER_VALID,
    );
    session.goAway();
    session.destroy(new Error(`${TOKEN_NO_LONGER_VALID}: ${error.message}`, { cause: error }));
  });
  session.on("close", unwatch);
}
