export { type KubeStatus, kubeStatus } from "../../common/kubernetes-status.ts";
export {
  type AuthorizeProxyRequest,
  agentTokenAccess,
  type ProxyAccess,
  ProxyAccessError,
} from "./access.ts";
export { KUBERNETES_SERVICE, type KubernetesProxyOptions, serveKubernetesProxy } from "./server.ts";
