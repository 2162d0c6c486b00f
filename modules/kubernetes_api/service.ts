/** The stream header's `service` under which agentk serves the Kubernetes API to kas. */
export const KUBERNETES_SERVICE = "kubernetes";
