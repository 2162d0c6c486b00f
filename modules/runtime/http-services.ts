/**
 * The stream header's `service` under which agentk serves the Kubernetes API to kas (the
 * `kubernetes_api` module). Reserved: no allow-listed service may take it, and GitLab's service
 * proxy does not reach it; only the Kubernetes API proxy, with kas's identity, does.
 */
export const KUBERNETES_SERVICE = "kubernetes";
