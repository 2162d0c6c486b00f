// GitOps end to end, in this process: kas (static tokens file, local git repositories) streams the
// agent's manifest projects to an in-process agentk, whose GitOps module applies them to the
// Kubernetes test server and reports each sync; kas shows the reports at
// `GET /api/v1/agents/{id}/gitops`. The poll periods are an hour: every change arrives through a
// push notification. agentk's drift interval is shortened (the harness's `gitops` tuning) so that
// the periodic re-apply shows within the test.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { stringify } from "yaml";
import { inventoryLocation } from "../../../modules/gitops/agentk/applier/index.ts";
import { gitlabJwt, TOKEN } from "../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { GitRepo } from "../../support/git-repo.ts";
import { type KubeApiServer, type KubeObject, startKubeApiServer } from "../../support/kube-apiserver.ts";
import { until } from "../../support/until.ts";

const CONFIG = ".gitlab/agents/prod/config.yaml";
const MANIFESTS = "group/manifests";
const OTHER = "group/other";
const BIG = "group/big";
/** Named in the agent's configuration, not among its token's manifest projects. */
const SECRET = "group/secret";
const MAX_FILES = 30;
// Long enough that a sync's report is read before the next re-apply replaces it on kas's API.
const DRIFT_MS = 3000;
const WAIT = 8000;

const OWNING_INVENTORY = "config.k8s.io/owning-inventory";

type Doc = Record<string, unknown>;
const docs = (...d: Doc[]): string => d.map((x) => stringify(x)).join("---\n");
const ns = (name: string): Doc => ({ apiVersion: "v1", kind: "Namespace", metadata: { name } });
const cm = (name: string, namespace: string | undefined, value: string): Doc => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, ...(namespace && { namespace }) },
  data: { value },
});
const widget = (name: string, namespace: string | undefined, size: number): Doc => ({
  apiVersion: "example.com/v1",
  kind: "Widget",
  metadata: { name, ...(namespace && { namespace }) },
  spec: { size },
});
const crd: Doc = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "widgets.example.com" },
  spec: {
    group: "example.com",
    scope: "Namespaced",
    names: { plural: "widgets", singular: "widget", kind: "Widget", listKind: "WidgetList" },
    versions: [
      {
        name: "v1",
        served: true,
        storage: true,
        schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
      },
    ],
  },
};

/** group/manifests at its first commit: 26 objects in 9 files (CRD, Namespaces, CRs, RBAC, core kinds). */
function manifestFiles(change = 0): Record<string, string> {
  return {
    "README.md": "not a manifest: the globs skip it\n",
    // The custom resources come in a file read before the CRD's: the applier orders them.
    "manifests/a-widgets.yaml": docs(
      widget("w1", "team-a", 1 + change),
      widget("w2", "team-b", 2),
      widget("w3", undefined, 3),
    ),
    "manifests/crd.yaml": docs(crd),
    "manifests/namespaces.yaml": docs(ns("apps"), ns("team-a"), ns("team-b")),
    "manifests/team-a/config.yaml": docs(
      ...[0, 1, 2, 3, 4, 5].map((i) => cm(`cm-${i}`, "team-a", i === 0 ? `v${change}` : `a${i}`)),
    ),
    "manifests/team-b/config.yml": docs(...[0, 1, 2, 3].map((i) => cm(`cm-${i}`, "team-b", `b${i}`)), {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "creds", namespace: "team-b" },
      data: { k: "dg==" },
    }),
    "manifests/apps/web.yaml": docs(
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: "web" },
        spec: { selector: { app: "web" }, ports: [{ port: 80 }] },
      },
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "web" } },
      cm("web-settings", undefined, "on"),
    ),
    "manifests/rbac.yaml": docs(
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole",
        metadata: { name: "widget-reader" },
        rules: [{ apiGroups: ["example.com"], resources: ["widgets"], verbs: ["get", "list"] }],
      },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        metadata: { name: "reader", namespace: "team-a" },
        rules: [{ apiGroups: [""], resources: ["configmaps"], verbs: ["get"] }],
      },
    ),
    "manifests/shared.yaml": docs(cm("from-manifests", "shared", "m")),
    "manifests/removable.yaml": docs(cm("doomed", "team-a", "x"), widget("w-doomed", "team-b", 9)),
  };
}

/** [resource, namespace, name] of every object of `manifestFiles()`. */
const MANIFEST_OBJECTS: [string, string | undefined, string][] = [
  ["widgets.example.com", "team-a", "w1"],
  ["widgets.example.com", "team-b", "w2"],
  ["widgets.example.com", "shared", "w3"],
  ["customresourcedefinitions", undefined, "widgets.example.com"],
  ["namespaces", undefined, "apps"],
  ["namespaces", undefined, "team-a"],
  ["namespaces", undefined, "team-b"],
  ...[0, 1, 2, 3, 4, 5].map((i) => ["configmaps", "team-a", `cm-${i}`] as [string, string, string]),
  ...[0, 1, 2, 3].map((i) => ["configmaps", "team-b", `cm-${i}`] as [string, string, string]),
  ["secrets", "team-b", "creds"],
  ["services", "shared", "web"],
  ["serviceaccounts", "shared", "web"],
  ["configmaps", "shared", "web-settings"],
  ["clusterroles", undefined, "widget-reader"],
  ["roles", "team-a", "reader"],
  ["configmaps", "shared", "from-manifests"],
  ["configmaps", "team-a", "doomed"],
  ["widgets.example.com", "team-b", "w-doomed"],
];

const otherFiles = (withThird = true): Record<string, string> => ({
  "ns.yaml": docs(ns("other")),
  "one.yaml": docs(cm("other-1", undefined, "o1")),
  "two.yaml": docs(cm("other-2", "shared", "o2")),
  ...(withThird && { "three.yaml": docs(cm("other-3", undefined, "o3")) }),
});

interface ObjectResult {
  group: string;
  kind: string;
  namespace: string;
  name: string;
  status: string;
  error?: string;
  source?: string;
}
interface ProjectShown {
  project: string;
  last_sent: { commitId: string; files: number; bytes: number } | null;
  last_sync: {
    commitId: string;
    error?: string;
    counts: Record<string, number>;
    objects: ObjectResult[];
  } | null;
  last_error: { source: string; kind: string; code?: string; message: string } | null;
}

interface ConfigProject {
  id: string;
  default_namespace: string;
  paths: { glob: string }[];
  prune: boolean;
}

describe("GitOps end to end: kas + agentk + git + the Kubernetes test server", () => {
  let dir: string;
  let kube: KubeApiServer;
  let kas: InProcessKas;
  let agent: InProcessAgentk;
  const repos: Record<string, GitRepo> = {};
  let configRepo: GitRepo;
  const commits: Record<string, string> = {};

  const projectsConfig: ConfigProject[] = [
    {
      id: MANIFESTS,
      default_namespace: "shared",
      paths: [{ glob: "manifests/**/*.{yaml,yml}" }],
      prune: true,
    },
    // The same default namespace as group/manifests: both inventories live side by side there, and
    // objects without a namespace of both projects go there.
    { id: OTHER, default_namespace: "shared", paths: [{ glob: "*.yaml" }], prune: false },
    { id: BIG, default_namespace: "shared", paths: [{ glob: "**/*.yaml" }], prune: true },
    { id: SECRET, default_namespace: "shared", paths: [{ glob: "**/*.yaml" }], prune: true },
  ];
  const writeConfig = () =>
    configRepo.commit({ [CONFIG]: stringify({ gitops: { manifest_projects: projectsConfig } }) });

  const api = async (path: string, init: RequestInit = {}) =>
    fetch(`${kas.addresses.api}${path}`, {
      ...init,
      headers: { "gitlab-kas-api-request": await gitlabJwt(kas.apiSecret), ...init.headers },
    });
  const push = async (project: { id?: number; full_path?: string }) => {
    const res = await api("/api/v1/notifications/git_push", {
      method: "POST",
      body: JSON.stringify({ project }),
      headers: { "content-type": "application/json" },
    });
    expect(res.status).toBe(204);
  };
  const shown = async (project: string): Promise<ProjectShown | undefined> => {
    const res = await api("/api/v1/agents/42/gitops");
    expect(res.status).toBe(200);
    const body = (await res.json()) as { manifest_projects: ProjectShown[] };
    return body.manifest_projects.find((p) => p.project === project);
  };
  /** Waits until kas shows a sync of `commit` for `project`; returns what it shows. */
  const syncedAt = async (project: string, commit: string): Promise<ProjectShown> => {
    let last: ProjectShown | undefined;
    await until(
      async () => {
        last = await shown(project);
        return last?.last_sync?.commitId === commit;
      },
      WAIT,
      `the sync of ${project} at ${commit} on kas's API`,
    );
    return last!;
  };
  const has = (resource: string, namespace: string | undefined, name: string) =>
    kube.store.has(resource, namespace, name);
  const get = (resource: string, namespace: string | undefined, name: string): KubeObject =>
    kube.store.get(resource, namespace, name);
  const cmValue = (namespace: string, name: string) =>
    (get("configmaps", namespace, name).data as Record<string, string> | undefined)?.value;
  const appliedByAgent = (o: KubeObject) =>
    (o.metadata.managedFields ?? []).some((m) => m.manager === "agentk" && m.operation === "Apply");

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "gitops-e2e-"));
    kube = await startKubeApiServer();
    // A namespace both manifest projects write into, made by an administrator.
    kube.store.create("namespaces", undefined, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "shared" },
    });
    configRepo = await GitRepo.init();
    for (const p of [MANIFESTS, OTHER, BIG]) repos[p] = await GitRepo.init();
    commits[MANIFESTS] = await repos[MANIFESTS]!.commit(manifestFiles());
    commits[OTHER] = await repos[OTHER]!.commit(otherFiles());
    // One file more than kas may send.
    commits[BIG] = await repos[BIG]!.commit(
      Object.fromEntries(
        Array.from({ length: MAX_FILES + 1 }, (_, i) => [`f${i}.yaml`, docs(cm(`big-${i}`, undefined, "b"))]),
      ),
    );
    await writeConfig();
    const tokensFile = join(dir, "tokens.yaml");
    await writeFile(
      tokensFile,
      `${TOKEN}: ${JSON.stringify({
        agentId: 42,
        projectId: 7,
        agentName: "prod",
        repository: configRepo.path,
        manifest_projects: {
          [MANIFESTS]: repos[MANIFESTS]!.path,
          [OTHER]: repos[OTHER]!.path,
          [BIG]: repos[BIG]!.path,
        },
      })}\n`,
    );
    kas = await startInProcessKas((config) => {
      config.agent.staticTokensFile = tokensFile;
      config.agent.configuration.pollPeriodMs = 3_600_000;
      config.agent.gitops.pollPeriodMs = 3_600_000;
      config.agent.gitops.maxNumberOfFiles = MAX_FILES;
    });
    agent = await startInProcessAgentk({
      kasUrl: kas.addresses.agent,
      token: TOKEN,
      kubernetes: await kube.writeKubeconfig(join(dir, "kubeconfig")),
      pod: { name: "agentk-e2e", namespace: "default" },
      gitops: { driftIntervalMs: DRIFT_MS, pollIntervalMs: 50, backoff: { initialMs: 100, maxMs: 1000 } },
    });
  });
  afterAll(async () => {
    await agent?.stop();
    await kas?.close();
    await kube?.close();
    await Promise.all([configRepo, ...Object.values(repos)].map((r) => r?.remove()));
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test("1. the first commit: every object applied with the agent's field manager, the sync on kas's API", async () => {
    const status = await syncedAt(MANIFESTS, commits[MANIFESTS]!);
    for (const [resource, namespace, name] of MANIFEST_OBJECTS) {
      expect(has(resource, namespace, name), `${resource} ${namespace}/${name}`).toBe(true);
      expect(appliedByAgent(get(resource, namespace, name)), `${resource} ${namespace}/${name}`).toBe(true);
    }
    expect(get("widgets.example.com", "team-a", "w1").spec).toEqual({ size: 1 });
    expect(get("secrets", "team-b", "creds").data).toEqual({ k: "dg==" });
    expect(status.last_sent).toMatchObject({ commitId: commits[MANIFESTS], files: 9 });
    const sync = status.last_sync!;
    expect(sync.error ?? "").toBe("");
    expect(sync.objects).toHaveLength(MANIFEST_OBJECTS.length);
    expect(sync.objects.every((o) => o.status === "applied")).toBe(true);
    expect(sync.counts).toEqual({ applied: MANIFEST_OBJECTS.length });
    expect(sync.objects).toContainEqual(
      expect.objectContaining({
        group: "example.com",
        kind: "Widget",
        namespace: "team-b",
        name: "w2",
        source: "manifests/a-widgets.yaml",
      }),
    );
    expect(status.last_error).toBeNull();
  });

  test("2. a commit and a push: the change is applied at once (the poll period is an hour)", async () => {
    const before = get("configmaps", "team-a", "cm-0").metadata.resourceVersion;
    commits[MANIFESTS] = await repos[MANIFESTS]!.commit(manifestFiles(1));
    await push({ full_path: MANIFESTS });
    await until(() => cmValue("team-a", "cm-0") === "v1", WAIT, "the change applied");
    expect(get("widgets.example.com", "team-a", "w1").spec).toEqual({ size: 2 });
    expect(get("configmaps", "team-a", "cm-0").metadata.resourceVersion).not.toBe(before);
    const sync = (await syncedAt(MANIFESTS, commits[MANIFESTS]!)).last_sync!;
    const statusOf = (kind: string, namespace: string, name: string) =>
      sync.objects.find((o) => o.kind === kind && o.namespace === namespace && o.name === name)?.status;
    expect(statusOf("ConfigMap", "team-a", "cm-0")).toBe("applied");
    expect(statusOf("Widget", "team-a", "w1")).toBe("applied");
    expect(statusOf("ConfigMap", "team-a", "cm-1")).toBe("unchanged");
  });

  test("3. a file removed: its objects are pruned", async () => {
    const files = manifestFiles(1);
    delete files["manifests/removable.yaml"];
    commits[MANIFESTS] = await repos[MANIFESTS]!.commit(files);
    await push({ full_path: MANIFESTS });
    await until(
      () => !has("configmaps", "team-a", "doomed") && !has("widgets.example.com", "team-b", "w-doomed"),
      WAIT,
      "the removed file's objects pruned",
    );
    const sync = (await syncedAt(MANIFESTS, commits[MANIFESTS]!)).last_sync!;
    const pruned = sync.objects.filter((o) => o.status === "pruned").map((o) => `${o.kind}/${o.name}`);
    expect(pruned.sort()).toEqual(["ConfigMap/doomed", "Widget/w-doomed"]);
    // The rest stays.
    for (const [resource, namespace, name] of MANIFEST_OBJECTS.slice(0, -2))
      expect(has(resource, namespace, name), `${resource} ${namespace}/${name}`).toBe(true);
  });

  test("4. drift made by another field manager is reverted by the periodic re-apply", async () => {
    const tampered = kube.store.apply(
      "configmaps",
      "team-a",
      "cm-1",
      {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "cm-1", namespace: "team-a" },
        data: { value: "tampered" },
      },
      { fieldManager: "intruder", force: true },
    ).object;
    expect((tampered.data as Record<string, string>).value).toBe("tampered");
    expect(tampered.metadata.managedFields?.some((m) => m.manager === "intruder")).toBe(true);
    // No commit, no push: only the drift interval (shortened to 3 s here; 5 minutes by default).
    await until(() => cmValue("team-a", "cm-1") === "a1", DRIFT_MS * 4, "the drift reverted");
    const cm1 = get("configmaps", "team-a", "cm-1");
    expect(appliedByAgent(cm1)).toBe(true);
    expect(cm1.metadata.managedFields?.some((m) => m.manager === "intruder")).toBe(false);
  });

  test("5. invalid YAML and an object the API refuses are reported by name; the rest is applied", async () => {
    const files: Record<string, string> = {
      ...manifestFiles(1),
      // Its first document is fine and applies; the second (document 1, counted from 0) is not YAML.
      "manifests/broken.yaml": `${docs(cm("before-broken", "team-b", "ok"))}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: [unclosed\n`,
      "manifests/refused.yaml": docs(cm("bad_name", "team-a", "x")),
      "manifests/added.yaml": docs(cm("added-with-errors", "team-b", "ok")),
    };
    delete files["manifests/removable.yaml"];
    commits[MANIFESTS] = await repos[MANIFESTS]!.commit(files);
    await push({ full_path: MANIFESTS });
    const status = await syncedAt(MANIFESTS, commits[MANIFESTS]!);
    const sync = status.last_sync!;
    const broken = sync.objects.find((o) => o.source === "manifests/broken.yaml" && o.status === "failed");
    expect(broken?.status).toBe("failed");
    expect(broken?.error).toContain("manifests/broken.yaml: document 1");
    const refused = sync.objects.find((o) => o.name === "bad_name");
    expect(refused).toMatchObject({ status: "failed", kind: "ConfigMap", source: "manifests/refused.yaml" });
    expect(refused?.error).toMatch(/^HTTP 422: .*metadata\.name/);
    expect(sync.counts.failed).toBe(2);
    expect(has("configmaps", "team-b", "added-with-errors")).toBe(true);
    expect(has("configmaps", "team-b", "before-broken")).toBe(true);
    expect(sync.objects.find((o) => o.name === "added-with-errors")?.status).toBe("applied");
    expect(has("configmaps", "team-a", "bad_name")).toBe(false);
    expect(status.last_error).toMatchObject({ source: "agent", kind: "sync" });
    expect(status.last_error?.message).toContain("manifests/broken.yaml");

    // Fixed: the broken files go, and with them the error.
    delete files["manifests/broken.yaml"];
    delete files["manifests/refused.yaml"];
    commits[MANIFESTS] = await repos[MANIFESTS]!.commit(files);
    await push({ full_path: MANIFESTS });
    const fixed = await syncedAt(MANIFESTS, commits[MANIFESTS]!);
    expect(fixed.last_sync?.counts.failed ?? 0).toBe(0);
    expect(fixed.last_error).toBeNull();
    // Readable again, so pruning resumes: the file's good document goes with it.
    expect(has("configmaps", "team-b", "before-broken")).toBe(false);
  });

  test("6. the two manifest projects are isolated: neither prunes the other's objects", async () => {
    const manifestsInventory = get("configmaps", "shared", "from-manifests").metadata.annotations?.[
      OWNING_INVENTORY
    ];
    const otherInventory = get("configmaps", "shared", "other-2").metadata.annotations?.[OWNING_INVENTORY];
    expect(otherInventory).toBeDefined();
    expect(otherInventory).not.toBe(manifestsInventory);
    // Inventories are named after the agent kas says is calling (agent 42), not a fixed owner.
    expect(manifestsInventory).toBe(inventoryLocation("agent-42", "group/manifests", "shared").id);
    expect(otherInventory).toBe(inventoryLocation("agent-42", "group/other", "shared").id);
    // group/manifests pruned (test 3) in the namespace the other project writes to: the other's stay.
    expect(has("configmaps", "shared", "other-1")).toBe(true);
    expect(has("configmaps", "shared", "other-3")).toBe(true);

    // group/other (prune: false) drops a file: its object stays.
    commits[OTHER] = await repos[OTHER]!.commit(otherFiles(false));
    await push({ full_path: OTHER });
    await syncedAt(OTHER, commits[OTHER]!);
    expect(has("configmaps", "shared", "other-3")).toBe(true);

    // Now prune: true for group/other (a configuration change, re-applied at once): other-3 goes,
    // and nothing of group/manifests, although both write to "shared".
    projectsConfig[1]!.prune = true;
    await writeConfig();
    await push({ id: 7 });
    await until(() => !has("configmaps", "shared", "other-3"), WAIT, "group/other pruning its own object");
    expect(has("configmaps", "shared", "other-2")).toBe(true);
    for (const [resource, namespace, name] of MANIFEST_OBJECTS.slice(0, -2))
      expect(has(resource, namespace, name), `${resource} ${namespace}/${name}`).toBe(true);
    expect(has("configmaps", "team-b", "added-with-errors")).toBe(true);

    // group/manifests syncs again (a push, same commit: nothing new) and a new commit: other's stay.
    commits[MANIFESTS] = await repos[MANIFESTS]!.commit({
      ...manifestFiles(2),
      "manifests/added.yaml": docs(cm("added-with-errors", "team-b", "ok")),
    });
    await push({ full_path: MANIFESTS });
    await syncedAt(MANIFESTS, commits[MANIFESTS]!);
    expect(has("configmaps", "shared", "other-2")).toBe(true);
    expect(has("configmaps", "shared", "other-1")).toBe(true);
  });

  test("7. a project the token may not read: refused on kas's API for that project only", async () => {
    let secret: ProjectShown | undefined;
    await until(
      async () => {
        secret = await shown(SECRET);
        return secret?.last_error != null;
      },
      WAIT,
      "the refusal shown",
    );
    expect(secret?.last_error).toMatchObject({ source: "kas", kind: "refused", code: "PERMISSION_DENIED" });
    expect(secret?.last_error?.message).toContain("not among the manifest projects of agent 42");
    expect(secret?.last_sent).toBeNull();
    expect(secret?.last_sync).toBeNull();
    for (const p of [MANIFESTS, OTHER]) {
      const s = await shown(p);
      expect(s?.last_error, p).toBeNull();
      expect(s?.last_sync?.commitId, p).toBe(commits[p]);
    }
  });

  test("8. a limit: more files than max_number_of_files is refused with a readable reason", async () => {
    let big: ProjectShown | undefined;
    await until(
      async () => {
        big = await shown(BIG);
        return big?.last_error != null;
      },
      WAIT,
      "the limit shown",
    );
    expect(big?.last_error).toMatchObject({ source: "kas", kind: "refused", code: "RESOURCE_EXHAUSTED" });
    expect(big?.last_error?.message).toContain(
      `the path globs match ${MAX_FILES + 1} files, more than max_number_of_files (${MAX_FILES})`,
    );
    expect(big?.last_sent).toBeNull();
    expect(has("configmaps", "shared", "big-0")).toBe(false);
    expect((await shown(MANIFESTS))?.last_error).toBeNull();
  });
});
