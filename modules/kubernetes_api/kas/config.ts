// The Kubernetes API proxy's section of kas's configuration: agent.kubernetes_api.
import { z } from "zod";
import {
  boolSetting,
  durationSetting,
  listenSection,
  notUsedSetting,
  urlPathSetting,
} from "../../../tool/config/kinds.ts";
import { parsePositiveDuration } from "../../../tool/config/values.ts";

export const kubernetesApiKasSection = z.object({
  listen: listenSection(
    { default: "0.0.0.0:8154", doc: "Kubernetes API proxy for users and CI jobs." },
    {
      plaintext: boolSetting({
        default: false,
        doc: "Serve plain HTTP (behind a proxy that terminates TLS). Otherwise, without certificate_file, kas makes a CA and a certificate and keeps them under data_dir (kubectl sends tokens over TLS only).",
      }),
      shutdownGracePeriodMs: notUsedSetting(parsePositiveDuration, {
        kind: "duration",
        doc: "GitLab's: how long in-flight proxy requests get on shutdown.",
        notUsed: "this kas gives in-flight requests of every listener shutdown_grace_period",
      }),
    },
  ),
  urlPathPrefix: urlPathSetting({ default: "/", doc: "Path prefix of the proxy." }),
  allowedAgentCacheTtlMs: durationSetting({
    default: "60s",
    doc: "How long GitLab's answer about a CI job token or a user's credentials (allowed_agents, authorize_proxy_user) is reused.",
  }),
  allowedAgentCacheErrorTtlMs: durationSetting({
    default: "10s",
    doc: "How long GitLab's refusal of a CI job token or a user's credentials is reused.",
  }),
});

export type KubernetesApiConfig = z.output<typeof kubernetesApiKasSection>;
