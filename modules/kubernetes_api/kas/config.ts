// The Kubernetes API proxy's section of kas's configuration: agent.kubernetes_api.
import { z } from "zod";
import { listenSection, urlPathSetting } from "../../../cmd/common/config/kinds.ts";

export const kubernetesApiKasSection = z.object({
  listen: listenSection({ default: "0.0.0.0:8154", doc: "Kubernetes API proxy for users and CI jobs." }),
  urlPathPrefix: urlPathSetting({ default: "/", doc: "Path prefix of the proxy." }),
});

export type KubernetesApiConfig = z.output<typeof kubernetesApiKasSection>;
