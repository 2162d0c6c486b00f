// Two agentk replicas of one agent: only the leader (its Lease in the Kubernetes test server) runs
// the Flux module, so kas holds one ReconcileProjects stream and a push calls the Receiver once;
// when the leader stops, the other replica takes over and the next push reconciles through it.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, expect, test } from "vitest";
import { stringify } from "yaml";
import { gitlabJwt, TOKEN } from "../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { GitRepo } from "../../support/git-repo.ts";
import { bearer, grpcTarget, unary } from "../../support/gitlab-grpc.ts";
import { gitlabReferenceFluxClients } from "../../support/gitlab-reference-grpc.ts";
import { type KubeApiServer, startKubeApiServer } from "../../support/kube-apiserver.ts";
import { until } from "../../support/until.ts";
import { gitRepository, installFluxCrds, metric } from "./helpers.ts";
import {
  GIT_REPOSITORIES,
  NotificationController,
  RECEIVERS,
  REQUESTED_AT,
} from "./notification-controller.ts";

const APP = "group/app";
const NS = "apps";
const WAIT = 15_000;

let dir: string;
let kube: KubeApiServer;
let flux: NotificationController;
let kas: InProcessKas;
let notifications: grpc.Client;
let jwt: string;
const repos: GitRepo[] = [];
const agents: InProcessAgentk[] = [];

const followed = (a: InProcessAgentk) => metric(a.agent.urls.observability!, "agentk_flux_followed_projects");
const kasStreams = () => metric(kas.addresses.observability, "kas_flux_streams");
const requestedAt = () => kube.store.get(GIT_REPOSITORIES, NS, "app").metadata.annotations?.[REQUESTED_AT];
const push = () =>
  unary(notifications, "GitPushEvent", { event: { project: { id: "7", full_path: APP } } }, bearer(jwt));

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "flux-leader-"));
  kube = await startKubeApiServer();
  await installFluxCrds(kube.store);
  kube.store.create("namespaces", undefined, { metadata: { name: NS } });
  kube.store.create(GIT_REPOSITORIES, NS, gitRepository(NS, "app", `https://gitlab.example.com/${APP}.git`));
  flux = await NotificationController.start(kube.store);
  const configRepo = await GitRepo.init();
  const app = await GitRepo.init();
  repos.push(configRepo, app);
  await configRepo.commit({
    ".gitlab/agents/prod/config.yaml": stringify({ flux: { webhook_receiver_url: flux.url } }),
  });
  await app.commit({ "README.md": APP });
  const tokensFile = join(dir, "tokens.yaml");
  await writeFile(
    tokensFile,
    `${TOKEN}: ${JSON.stringify({
      agentId: 42,
      projectId: 7,
      agentName: "prod",
      repository: configRepo.path,
      manifest_projects: { [APP]: app.path },
    })}\n`,
  );
  kas = await startInProcessKas((config) => {
    config.agent.staticTokensFile = tokensFile;
    config.agent.configuration.pollPeriodMs = 3_600_000;
    config.gitlab.externalUrl = "https://gitlab.example.com";
  });
  jwt = await gitlabJwt(kas.apiSecret, { iss: "gitlab.example.com" });
  notifications = new (gitlabReferenceFluxClients().Notifications)(
    grpcTarget(kas.addresses.api!),
    grpc.credentials.createInsecure(),
  );
  const kubeconfig = await kube.writeKubeconfig(join(dir, "kubeconfig"));
  for (const name of ["agentk-0", "agentk-1"]) {
    agents.push(
      await startInProcessAgentk({
        kasUrl: kas.addresses.agent,
        token: TOKEN,
        kubernetes: kubeconfig,
        pod: { name, namespace: "default" },
        flux: { debounceMs: 50, backoff: { initialMs: 50, maxMs: 500 } },
      }),
    );
  }
}, 30_000);

afterAll(async () => {
  notifications?.close();
  for (const a of agents) await a.stop();
  await kas?.close();
  await flux?.close();
  await kube?.close();
  await Promise.all(repos.map((r) => r.remove()));
  if (dir) await rm(dir, { recursive: true, force: true });
});

test("one stream for the agent, from its leader; after the leader stops, the other replica's push reconciles", async () => {
  await until(
    async () => (await Promise.all(agents.map(followed))).some((n) => n === 1),
    WAIT,
    "a leader following the project",
  );
  const counts = await Promise.all(agents.map(followed));
  const leader = counts.indexOf(1);
  expect(counts[1 - leader]).toBe(0);
  await until(async () => (await kasStreams()) === 1, WAIT, "the leader's stream on kas");
  await until(
    () =>
      (kube.store.get(RECEIVERS, NS, "gitlab-app").status as { webhookPath?: string })?.webhookPath !==
      undefined,
    WAIT,
    "the webhook path",
  );
  await push();
  await until(() => requestedAt() !== undefined, WAIT, "the first reconcile");
  const first = requestedAt();

  const other = agents[1 - leader]!;
  const [stopping] = agents.splice(leader, 1);
  await stopping!.stop(); // releases the Lease: the other replica takes over
  await until(async () => (await followed(other)) === 1, WAIT, "the new leader following the project");
  await until(async () => (await kasStreams()) === 1, WAIT, "the new leader's stream on kas");
  await push();
  await until(() => requestedAt() !== first, WAIT, "the reconcile through the new leader");
  // Both pushes reached the Receiver once each: one replica at a time called it.
  expect(flux.calls.filter((c) => c.annotated.includes(`${NS}/app`))).toHaveLength(2);
});
