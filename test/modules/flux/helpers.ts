// What the Flux tests share: Flux installed in the Kubernetes test server (its real CRDs), a
// GitRepository, and a metric read from a /metrics page.
import { readFile } from "node:fs/promises";
import { parseAllDocuments } from "yaml";
import type { KubeStore } from "../../support/kube-apiserver.ts";

const FIXTURES = new URL("../../fixtures/flux/", import.meta.url);
const CRD_FILES = [
  "source.toolkit.fluxcd.io_gitrepositories.yaml",
  "notification.toolkit.fluxcd.io_receivers.yaml",
];

/** Flux's CRDs (test/fixtures/flux), created as `flux install` creates them; Established by the server. */
export async function installFluxCrds(store: KubeStore): Promise<void> {
  for (const file of CRD_FILES) {
    for (const doc of parseAllDocuments(await readFile(new URL(file, FIXTURES), "utf8"))) {
      store.create("customresourcedefinitions", undefined, doc.toJSON());
    }
  }
}

export const gitRepository = (namespace: string, name: string, url: string) => ({
  apiVersion: "source.toolkit.fluxcd.io/v1",
  kind: "GitRepository",
  metadata: { name, namespace },
  spec: { url, interval: "10m", ref: { branch: "main" } },
});

/** The value of the sample `line` (name and labels) on the /metrics page at `url`; 0 when absent. */
export async function metric(url: string, line: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const found = text.split("\n").find((l) => l.startsWith(`${line} `));
  return found ? Number(found.slice(line.length + 1)) : 0;
}
