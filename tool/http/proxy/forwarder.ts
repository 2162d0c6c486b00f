// A reverse proxy from requests that arrived over the tunnel to one upstream HTTP(S) origin:
// bodies stream both ways (watch, logs -f), and an Upgrade (exec, attach, port-forward) becomes
// a raw byte splice once the upstream has said 101. Plain requests: forward-request.ts; upgrades:
// forward-upgrade.ts; what both share (the outgoing request, the status line): forward-context.ts.
import { type Forwarder, type ForwarderOptions, forwardContext, type Upstream } from "./forward-context.ts";
import { forwardRequest } from "./forward-request.ts";
import { forwardUpgrade } from "./forward-upgrade.ts";

export {
  CLIENT_CLOSED,
  DOT_SEGMENTS,
  type Forwarder,
  type ForwarderOptions,
  type RequestOutcome,
  type Upstream,
  type UpstreamRequest,
} from "./forward-context.ts";

export function createForwarder(upstream: Upstream, options: ForwarderOptions): Forwarder {
  const ctx = forwardContext(upstream, options);
  return {
    destroy: () => upstream.destroy(),
    request: (req, res) => forwardRequest(ctx, req, res),
    upgrade: (req, socket, head) => forwardUpgrade(ctx, req, socket, head),
  };
}
