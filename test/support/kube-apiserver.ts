// The Kubernetes API test server lives in ./kube/; this is the name its users import.

export {
  type KubeApiServer,
  type KubeApiServerOptions,
  type RecordedRequest,
  startKubeApiServer,
  statusBody,
} from "./kube/server.ts";
export { type KubeObject, KubeStore } from "./kube/store.ts";
