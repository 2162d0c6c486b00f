/**
 * Handshake headers agentk sends naming its pod (from POD_NAME / POD_NAMESPACE), so kas's logs can
 * say which replica of an agent holds a tunnel. Informational only: nothing is authorized by them.
 */
export const POD_NAME_HEADER = "x-agentk-pod-name";
export const POD_NAMESPACE_HEADER = "x-agentk-pod-namespace";

/** Longest header value kas keeps (a Kubernetes object name is at most 253 characters). */
const MAX = 253;

/** The pod an agentk handshake names, if it names one; over-long or repeated values are ignored. */
export function podFromHeaders(headers: Readonly<Record<string, string | string[] | undefined>>): {
  name?: string;
  namespace?: string;
} {
  const one = (v: string | string[] | undefined) =>
    typeof v === "string" && v.length <= MAX ? v : undefined;
  const name = one(headers[POD_NAME_HEADER]);
  const namespace = one(headers[POD_NAMESPACE_HEADER]);
  return { ...(name && { name }), ...(namespace && { namespace }) };
}
