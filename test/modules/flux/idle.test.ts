// When agentk's Flux module does nothing, and says why: Flux's CRDs not installed (GitLab's agent
// checks them once per run), or kas without gitlab.external_url (no GitRepository can be told to be
// GitLab's). Neither asks kas for pushes nor writes to the cluster.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { createLogger } from "../../../cmd/agentk/observability/index.ts";
import { TOKEN } from "../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../support/agentk-in-process.ts";
import { type KubeApiServer, startKubeApiServer } from "../../support/kube-apiserver.ts";
import { until } from "../../support/until.ts";
import { gitRepository, installFluxCrds, metric } from "./helpers.ts";
import { GIT_REPOSITORIES, RECEIVERS } from "./notification-controller.ts";

const WAIT = 8000;

describe("the Flux module idles, saying why", () => {
  let dir: string | undefined;
  let kube: KubeApiServer | undefined;
  let kas: InProcessKas | undefined;
  let agent: InProcessAgentk | undefined;
  const lines: string[] = [];

  afterEach(async () => {
    await agent?.stop();
    await kas?.close();
    await kube?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
    lines.length = 0;
  });

  async function start(withFlux: boolean, externalUrl?: string) {
    dir = await mkdtemp(join(tmpdir(), "flux-idle-"));
    kube = await startKubeApiServer();
    if (withFlux) {
      await installFluxCrds(kube.store);
      kube.store.create("namespaces", undefined, { metadata: { name: "apps" } });
      kube.store.create(
        GIT_REPOSITORIES,
        "apps",
        gitRepository("apps", "app", "https://gitlab.example.com/group/app.git"),
      );
    }
    kas = await startInProcessKas((config) => {
      if (externalUrl) config.gitlab.externalUrl = externalUrl;
    });
    agent = await startInProcessAgentk({
      kasUrl: kas.addresses.agent,
      token: TOKEN,
      kubernetes: await kube.writeKubeconfig(join(dir, "kubeconfig")),
      log: createLogger({ level: "info", destination: { write: (l: string) => void lines.push(l) } }),
      flux: { debounceMs: 10 },
    });
  }
  const said = (message: string) => lines.map((l) => JSON.parse(l)).find((l) => l.msg === message);
  const streams = () => metric(kas!.addresses.observability, "kas_flux_streams");

  test("Flux's CRDs not installed: a log line naming the missing one, no stream to kas", async () => {
    await start(false, "https://gitlab.example.com");
    const message = "flux: Flux is not installed; the module idles until agentk's next leader term";
    await until(() => said(message) !== undefined, WAIT, "the log line");
    expect(said(message)).toMatchObject({ crd: "gitrepositories.source.toolkit.fluxcd.io (not installed)" });
    expect(await streams()).toBe(0);
  });

  test("kas without gitlab.external_url: a warning, the GitRepository left alone, no stream to kas", async () => {
    await start(true);
    const message = "flux: kas has no gitlab.external_url; no GitRepository can be told to be GitLab's";
    await until(() => said(message) !== undefined, WAIT, "the warning");
    expect(kube!.store.list(RECEIVERS, undefined)).toEqual([]);
    expect(await streams()).toBe(0);
  });
});
