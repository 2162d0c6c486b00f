import { REASONS } from "../http/failure.ts";

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
