// The Kubernetes `Status` object both daemons answer failures with, as kubectl expects them.

/** HTTP status -> the Kubernetes reason kubectl shows. */
export const REASONS: Readonly<Record<number, string>> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  405: "MethodNotAllowed",
  500: "InternalError",
  502: "BadGateway",
  503: "ServiceUnavailable",
  504: "Timeout",
};

/** A Kubernetes `Status` (what kubectl and client libraries print for a failed request). */
export interface KubeStatus {
  kind: "Status";
  apiVersion: "v1";
  metadata: Record<string, never>;
  status: "Failure";
  message: string;
  reason: string;
  code: number;
}

export function kubeStatus(code: number, message: string, reason = REASONS[code] ?? "Unknown"): KubeStatus {
  return { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason, code };
}
