// Shared by the GitOps agentk tests: a Kubernetes test server, a client for it, manifest projects.
import { KubeConfig } from "@kubernetes/client-node";
import { stringify } from "yaml";
import type { ManifestProject } from "../../../../modules/gitops/agentk/applier/index.ts";
import type { KubeApiServer } from "../../../support/kube-apiserver.ts";

export function kubeConfigFor(api: KubeApiServer): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "t", server: api.url, caData: Buffer.from(api.caCert).toString("base64") }],
    users: [{ name: "t", token: api.token }],
    contexts: [{ name: "t", cluster: "t", user: "t" }],
    currentContext: "t",
  });
  return kc;
}

/** A manifest project entry with the schema's defaults. */
export function project(id: string, overrides: Partial<ManifestProject> = {}): ManifestProject {
  return {
    id,
    default_namespace: "default",
    paths: [{ glob: "**/*.{yaml,yml,json}" }],
    reconcile_timeout: 10_000,
    dry_run_strategy: "none",
    prune: true,
    prune_timeout: 10_000,
    prune_propagation_policy: "foreground",
    inventory_policy: "must_match",
    ...overrides,
  } as ManifestProject;
}

/** YAML documents, one file. */
export const yamlDocs = (...docs: object[]): string => docs.map((d) => stringify(d)).join("---\n");

export const configMap = (name: string, namespace: string | undefined, data: Record<string, string>) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, ...(namespace && { namespace }) },
  data,
});

export const namespace = (name: string) => ({ apiVersion: "v1", kind: "Namespace", metadata: { name } });

export const deployment = (name: string, ns: string, replicas = 2) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name, namespace: ns },
  spec: {
    replicas,
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "c", image: "nginx" }] } },
  },
});
