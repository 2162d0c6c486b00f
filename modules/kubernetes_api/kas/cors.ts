// Browsers may call the Kubernetes API proxy from GitLab's web UI only (the session cookie rides
// along): the origin of GitLab's external URL, with credentials; any other origin is refused.
import type { IncomingHttpHeaders } from "node:http";

export interface CorsPolicy {
  /** Origins allowed, e.g. "https://gitlab.example.com" (from gitlab.external_url). */
  allowedOrigins: readonly string[];
}

/**
 * The CORS response headers for a request from `origin`: none without an Origin header (not a
 * browser's cross-origin call); undefined when the origin is not allowed.
 */
export function corsHeaders(
  policy: CorsPolicy | undefined,
  origin: string | undefined,
): Record<string, string> | undefined {
  if (origin === undefined) return {};
  if (!policy?.allowedOrigins.includes(origin)) return undefined;
  return {
    "access-control-allow-origin": origin,
    "access-control-allow-credentials": "true",
    vary: "Origin",
  };
}

/** The answer to a preflight (OPTIONS with Origin), once the origin is allowed. */
export function preflightHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  return {
    "access-control-allow-headers": headers["access-control-request-headers"] ?? "",
    "access-control-allow-methods": "GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH",
    "access-control-max-age": "86400",
    "content-length": "0",
  };
}
