// The metadata every Gitaly call carries: the v2 token (when GitLab gave one) and the Gitaly
// feature flags GitLab evaluated for the project.
import { Metadata } from "@grpc/grpc-js";
import type { GitalyInfo } from "../../../../modules/runtime/index.ts";
import { gitalyAuthorization } from "./auth.ts";

const FEATURE_PREFIX = "gitaly-feature-";

/**
 * The metadata key for one entry of `gitaly_info.features`. GitLab sends full keys
 * ("gitaly-feature-some-flag" => "true", Gitlab::GitalyClient.server_feature_flags); a bare flag
 * name is given the prefix the same way GitLab builds it (underscores become dashes).
 */
export function featureMetadataKey(name: string): string {
  const key = name.toLowerCase();
  return key.startsWith(FEATURE_PREFIX) ? key : `${FEATURE_PREFIX}${key.replaceAll("_", "-")}`;
}

export function gitalyCallMetadata(info: GitalyInfo, nowMs: number): Metadata {
  const md = new Metadata();
  for (const [name, value] of Object.entries(info.features ?? {})) {
    try {
      md.set(featureMetadataKey(name), value);
    } catch {
      // A key or value gRPC cannot carry is skipped rather than failing every call.
    }
  }
  if (info.token) md.set("authorization", gitalyAuthorization(info.token, nowMs));
  return md;
}
