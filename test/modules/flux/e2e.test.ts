// Flux end to end, in this process: kas (static tokens file, local git, gitlab.external_url set)
// and an in-process agentk whose Flux module watches Flux's real CRDs (test/fixtures/flux) on the
// Kubernetes test server. Flux's notification-controller is the stand-in beside this file. A push
// notification comes as GitLab sends it (GitLab's own Notifications proto, GitLab's JWT); the
// GitRepository that points at the project then gets `reconcile.fluxcd.io/requestedAt` from the
// Receiver agentk called. Every wait has a deadline; nothing sleeps.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { stringify } from "yaml";
import { createLogger } from "../../../cmd/agentk/observability/index.ts";
import type { AgentkModuleFactory } from "../../../modules/runtime/index.ts";
import { Phase } from "../../../modules/runtime/index.ts";
import { gitlabJwt, TOKEN } from "../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { GitRepo } from "../../support/git-repo.ts";
import { bearer, grpcTarget, unary } from "../../support/gitlab-grpc.ts";
import { gitlabReferenceFluxClients } from "../../support/gitlab-reference-grpc.ts";
import { type KubeApiServer, type KubeObject, startKubeApiServer } from "../../support/kube-apiserver.ts";
import { until, within } from "../../support/until.ts";
import { gitRepository, installFluxCrds, metric } from "./helpers.ts";
import {
  GIT_REPOSITORIES,
  NotificationController,
  RECEIVERS,
  REQUESTED_AT,
} from "./notification-controller.ts";

const CONFIG = ".gitlab/agents/prod/config.yaml";
const GITLAB = "https://gitlab.example.com";
/** Two GitRepositories point at it (an https and an ssh URL). */
const APP = "group/app";
/** The agent may read it; no GitRepository points at it. */
const OTHER = "group/other";
/** A GitRepository points at it; the agent may not read it. */
const SECRET = "group/secret";
/** A GitRepository made while agentk runs points at it. */
const LATE = "group/late";
const NS = "apps";
/** The done-when is a second; the wait allows two on a busy machine (speed is bench/'s business). */
const PUSH_DEADLINE_MS = 2000;
const WAIT = 8000;

describe("Flux: a push reconciles the GitRepositories that point at the project at once", () => {
  let dir: string;
  let kube: KubeApiServer;
  let flux: NotificationController;
  let kas: InProcessKas;
  let agent: InProcessAgentk;
  let notifications: grpc.Client;
  let jwt: string;
  const logLines: string[] = [];
  const repos: GitRepo[] = [];
  /** The agent's gRPC channel to kas, as a module of the test's own sees it. */
  let kasRpc: grpc.Channel | undefined;

  const kasMetric = (line: string) => metric(kas.addresses.observability, line);
  const agentMetric = (line: string) => metric(agent.agent.urls.observability!, line);
  const requestedAt = (name: string): string | undefined =>
    kube.store.get(GIT_REPOSITORIES, NS, name).metadata.annotations?.[REQUESTED_AT];
  const receiver = (name: string): KubeObject | undefined =>
    kube.store.has(RECEIVERS, NS, name) ? kube.store.get(RECEIVERS, NS, name) : undefined;
  const webhookPath = (name: string) =>
    (receiver(name)?.status as { webhookPath?: string } | undefined)?.webhookPath;
  /** What GitLab sends on a push (Gitlab::Kas::Client#send_git_push_event): GitLab's proto, its JWT. */
  const push = (fullPath: string, id = "7") =>
    unary(notifications, "GitPushEvent", { event: { project: { id, full_path: fullPath } } }, bearer(jwt));
  /** Resolves once a hook call annotated `gitRepository` (rejects after WAIT). */
  const hooked = (gitRepository: string) =>
    within(
      new Promise<void>((resolve) => {
        const onHook = (call: { annotated: string[] }) => {
          if (!call.annotated.includes(`${NS}/${gitRepository}`)) return;
          flux.off("hook", onHook);
          resolve();
        };
        flux.on("hook", onHook);
      }),
      WAIT,
      `the Receiver call for ${gitRepository}`,
    );

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "flux-e2e-"));
    kube = await startKubeApiServer();
    // Flux installed: its real CRDs, Established as the API server makes them.
    await installFluxCrds(kube.store);
    kube.store.create("namespaces", undefined, { metadata: { name: NS } });
    for (const [name, url] of [
      ["app", `${GITLAB}/${APP}.git`],
      ["github", `https://github.com/${APP}.git`],
      ["mirror", `ssh://git@gitlab.example.com/${APP}`],
      ["secret", `${GITLAB}/${SECRET}.git`],
    ] as const) {
      kube.store.create(GIT_REPOSITORIES, NS, gitRepository(NS, name, url));
    }
    flux = await NotificationController.start(kube.store);

    const configRepo = await GitRepo.init();
    repos.push(configRepo);
    await configRepo.commit({ [CONFIG]: stringify({ flux: { webhook_receiver_url: flux.url } }) });
    const projects: Record<string, string> = {};
    for (const p of [APP, OTHER, LATE]) {
      const repo = await GitRepo.init();
      repos.push(repo);
      await repo.commit({ "README.md": p });
      projects[p] = repo.path;
    }
    const tokensFile = join(dir, "tokens.yaml");
    await writeFile(
      tokensFile,
      `${TOKEN}: ${JSON.stringify({
        agentId: 42,
        projectId: 7,
        agentName: "prod",
        repository: configRepo.path,
        manifest_projects: projects,
      })}\n`,
    );
    kas = await startInProcessKas((config) => {
      config.agent.staticTokensFile = tokensFile;
      config.agent.configuration.pollPeriodMs = 3_600_000;
      config.gitlab.externalUrl = GITLAB;
    });
    jwt = await gitlabJwt(kas.apiSecret, { iss: "gitlab.example.com" });
    notifications = new (gitlabReferenceFluxClients().Notifications)(
      grpcTarget(kas.addresses.api!),
      grpc.credentials.createInsecure(),
    );
    const channelProbe: AgentkModuleFactory = {
      name: "channel_probe",
      phase: Phase.capability,
      create: (deps) => {
        kasRpc = deps.kasRpc;
        return { name: "channel_probe" };
      },
    };
    agent = await startInProcessAgentk({
      kasUrl: kas.addresses.agent,
      token: TOKEN,
      kubernetes: await kube.writeKubeconfig(join(dir, "kubeconfig")),
      pod: { name: "agentk-flux", namespace: "default" },
      log: createLogger({ level: "info", destination: { write: (l: string) => void logLines.push(l) } }),
      flux: { debounceMs: 50, backoff: { initialMs: 50, maxMs: 500 } },
      modules: [channelProbe],
    });
    // Ready: the Receivers' projects asked for on kas (the app's, the secret's), their webhook paths set.
    await until(
      async () => (await kasMetric("kas_flux_followed_projects")) === 2,
      WAIT,
      "kas following 2 projects",
    );
    await until(
      () => ["gitlab-app", "gitlab-mirror", "gitlab-secret"].every((r) => webhookPath(r)),
      WAIT,
      "webhook paths",
    );
  }, 30_000);

  afterAll(async () => {
    notifications?.close();
    await agent?.stop();
    await kas?.close();
    await flux?.close();
    await kube?.close();
    await Promise.all(repos.map((r) => r.remove()));
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test("each GitRepository on GitLab gets GitLab's Receiver and Secret, owned by it; others are left alone", () => {
    const app = kube.store.get(GIT_REPOSITORIES, NS, "app");
    const r = receiver("gitlab-app")!;
    expect(r.metadata.annotations).toMatchObject({
      "agent.gitlab.com/project": APP,
      "agent.gitlab.com/id": "42",
      "app.kubernetes.io/managed-by": "gitlab",
    });
    expect(r.metadata.ownerReferences).toEqual([
      expect.objectContaining({
        kind: "GitRepository",
        name: "app",
        uid: app.metadata.uid,
        controller: true,
      }),
    ]);
    expect(r.spec).toEqual({
      type: "generic",
      interval: "5m0s",
      resources: [{ kind: "GitRepository", name: "app", namespace: NS }],
      secretRef: { name: "gitlab-receiver-app" },
    });
    expect(kube.store.get("secrets", NS, "gitlab-receiver-app").data).toEqual({ token: "" });
    expect(receiver("gitlab-mirror")?.metadata.annotations?.["agent.gitlab.com/project"]).toBe(APP);
    // github.com is not GitLab's host: processed before "mirror" (one queue, in order), nothing made.
    expect(receiver("gitlab-github")).toBeUndefined();
    expect(kube.store.has("secrets", NS, "gitlab-receiver-github")).toBe(false);
    const applied = (r.metadata.managedFields ?? []).some(
      (m) => m.manager === "agentk" && m.operation === "Apply",
    );
    expect(applied).toBe(true);
  });

  test("a push to the project: both of its GitRepositories reconcile at once (a 2 s wait), a metric and a log line each", async () => {
    const before = await agentMetric('agentk_flux_reconcile_triggers_total{result="triggered"}');
    const notified = await kasMetric("kas_flux_git_push_notifications_total");
    const both = Promise.all([hooked("app"), hooked("mirror")]);
    await push(APP);
    await until(
      () => requestedAt("app") !== undefined && requestedAt("mirror") !== undefined,
      PUSH_DEADLINE_MS,
      "both annotated",
    );
    await both;
    expect(requestedAt("secret")).toBeUndefined();
    expect(requestedAt("github")).toBeUndefined();
    expect(await kasMetric("kas_flux_git_push_notifications_total")).toBe(notified + 1);
    await until(
      async () =>
        (await agentMetric('agentk_flux_reconcile_triggers_total{result="triggered"}')) === before + 2,
      WAIT,
      "two triggers counted",
    );
    const lines = logLines
      .filter((l) => l.includes("flux: reconcile triggered after a push"))
      .map((l) => JSON.parse(l));
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ project: APP, namespace: NS, receiver: "gitlab-app" }),
        expect.objectContaining({ project: APP, namespace: NS, receiver: "gitlab-mirror" }),
      ]),
    );
  });

  test("a push to a project no GitRepository points at triggers nothing", async () => {
    const calls = flux.calls.length;
    const notified = await kasMetric("kas_flux_git_push_notifications_total");
    const appBefore = requestedAt("app");
    // OTHER first, then APP as the marker: one stream, in order, so once APP's calls are in, OTHER's would be too.
    await push(OTHER);
    const marker = hooked("app");
    await push(APP);
    await marker;
    await until(() => requestedAt("app") !== appBefore, WAIT, "the marker's annotation");
    const since = flux.calls.slice(calls);
    expect(since.every((c) => c.annotated.every((a) => a === `${NS}/app` || a === `${NS}/mirror`))).toBe(
      true,
    );
    expect(await kasMetric("kas_flux_git_push_notifications_total")).toBe(notified + 1);
  });

  test("a push to a project the agent may not read is not sent, though a GitRepository points at it", async () => {
    const refused = 'kas_flux_git_push_notifications_refused_total{reason="forbidden"}';
    const before = await kasMetric(refused);
    const calls = flux.calls.length;
    await push(SECRET);
    await until(async () => (await kasMetric(refused)) === before + 1, WAIT, "the refusal counted");
    const marker = hooked("app");
    await push(APP);
    await marker;
    expect(flux.calls.slice(calls).some((c) => c.annotated.includes(`${NS}/secret`))).toBe(false);
    expect(requestedAt("secret")).toBeUndefined();
  });

  test("a GitRepository made while agentk runs: its project is asked for, and a push reconciles it", async () => {
    kube.store.create(GIT_REPOSITORIES, NS, gitRepository(NS, "late", `${GITLAB}/${LATE}.git`));
    await until(
      async () => (await kasMetric("kas_flux_followed_projects")) === 3,
      WAIT,
      "kas following 3 projects",
    );
    await until(() => webhookPath("gitlab-late") !== undefined, WAIT, "the late Receiver's webhook path");
    await push(LATE);
    await until(
      () => requestedAt("late") !== undefined,
      PUSH_DEADLINE_MS,
      "the late GitRepository annotated",
    );
  });

  test("GitLab's own GitLabFlux client (GitLab's rpc.proto) over the agent's tunnel: ReconcileProjects streams pushes", async () => {
    const GitLabFlux = gitlabReferenceFluxClients().GitLabFlux;
    const client = new GitLabFlux("kas", grpc.credentials.createInsecure(), { channelOverride: kasRpc! });
    // Not closed: the channel is agentk's, shared by every module.
    {
      const followed = await kasMetric("kas_flux_followed_projects");
      const call = client.ReconcileProjects({ project: [{ id: OTHER }] }) as grpc.ClientReadableStream<{
        project: { id: string };
      }>;
      const first = within(
        new Promise<{ project: { id: string } }>((resolve, reject) => {
          call.once("data", resolve);
          call.once("error", reject);
        }),
        WAIT,
        "the pushed project on the stream",
      );
      await until(
        async () => (await kasMetric("kas_flux_followed_projects")) === followed + 1,
        WAIT,
        "the stream open",
      );
      await push(OTHER);
      expect(await first).toEqual({ project: { id: OTHER } });
      call.cancel();
      // GitLab's validation: a project needs its full path.
      const refused = client.ReconcileProjects({
        project: [{ id: "" }],
      }) as grpc.ClientReadableStream<unknown>;
      const err = await within(
        new Promise<grpc.ServiceError>((resolve) => refused.once("error", resolve)),
        WAIT,
        "the refusal",
      );
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    }
  });
});
