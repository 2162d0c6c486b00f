// gRPC failures as RepositoryErrors whose messages name the Gitaly address and the project,
// never the token.
import { type ServiceError, status } from "@grpc/grpc-js";
import { RepositoryError, type RepositoryErrorCode } from "../../../../modules/runtime/repositories.ts";

/** Which call failed, for messages. */
export interface CallSite {
  readonly address: string;
  readonly project: string;
  readonly method: string;
  /** Redacted from any message, should a server echo it. */
  readonly secret?: string;
}

export function isServiceError(err: unknown): err is ServiceError {
  return err instanceof Error && typeof (err as Partial<ServiceError>).code === "number" && "details" in err;
}

export function codeFor(code: status): RepositoryErrorCode {
  switch (code) {
    case status.UNAVAILABLE:
      return "unavailable";
    case status.NOT_FOUND:
      return "not_found";
    case status.UNAUTHENTICATED:
    case status.PERMISSION_DENIED:
      return "permission_denied";
    case status.DEADLINE_EXCEEDED:
    case status.CANCELLED:
      return "aborted";
    default:
      return "failed";
  }
}

/**
 * Gitaly answers NOT_FOUND both for a missing repository and (newer Gitaly) for a missing path or
 * revision inside one; only the former is an error for kas.
 */
export function isMissingRepository(err: ServiceError): boolean {
  return err.code === status.NOT_FOUND && /repository|storage/i.test(err.details);
}

function redact(text: string, secret: string | undefined): string {
  return secret ? text.replaceAll(secret, "[REDACTED]") : text;
}

export function gitalyError(err: unknown, site: CallSite): RepositoryError {
  if (err instanceof RepositoryError) return err;
  const where = `Gitaly ${site.address}, project ${site.project}: ${site.method}`;
  if (isServiceError(err)) {
    const detail = redact(err.details || status[err.code] || String(err.code), site.secret);
    // The cause keeps only the status: a ServiceError carries metadata we do not want in logs.
    return new RepositoryError(codeFor(err.code), `${where}: ${status[err.code]}: ${detail}`, {
      cause: { code: err.code, details: detail },
    });
  }
  const detail = redact(err instanceof Error ? err.message : String(err), site.secret);
  return new RepositoryError("failed", `${where}: ${detail}`);
}
