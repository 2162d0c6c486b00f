// The store of the Kubernetes API test server lives in ./kube/store.ts.
export * from "./kube/store.ts";
