export {
  type AuthorizeProxyRequest,
  agentTokenAccess,
  type ProxyAccess,
  ProxyAccessError,
} from "./access.ts";
export { KUBERNETES_SERVICE, type KubernetesProxyOptions, serveKubernetesProxy } from "./server.ts";
export { type KubeStatus, kubeStatus } from "./status.ts";
