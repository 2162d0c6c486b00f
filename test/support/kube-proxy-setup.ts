// kas's Kubernetes API proxy with GitLab's authorization, assembled for tests and bench:rpc: the
// Kubernetes test server, the GitLab API test server (groups, projects, jobs and users added by the
// caller; it knows agent 42, configuration project 7 at group/project-7), kas in this process (TLS
// on the proxy with the test CA, a static dev token for agent 42 whose configuration project is a
// local git repository holding `config`), and agentk with the test server's kubeconfig. Resolves
// once kas has read the agent's configuration and posted it to GitLab (GitLab's ci_access and
// user_access of the agent come from that post only).
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import type { KasConfig } from "../../cmd/kas/config/index.ts";
import { gitlabJwt, TOKEN } from "../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "./agentk-in-process.ts";
import { GitRepo } from "./git-repo.ts";
import { GitLabApiServer } from "./gitlab-api.ts";
import { type KubeApiServer, startKubeApiServer } from "./kube-apiserver.ts";
import { testPki } from "./tls-certs.ts";
import { until } from "./until.ts";

export interface KubeProxySetup {
  kube: KubeApiServer;
  gitlab: GitLabApiServer;
  kas: InProcessKas;
  agent: InProcessAgentk;
  /** Agent 42's configuration repository (`.gitlab/agents/prod/config.yaml`). */
  repo: GitRepo;
  /** PEM of the CA of kas's proxy certificate. */
  caCert: string;
  close(): Promise<void>;
}

export interface KubeProxySetupOptions {
  /** Declares GitLab's groups, projects and users before agent 42's project joins them. */
  seed?: (gitlab: GitLabApiServer) => void;
  /** The URL agentk dials for kas's agent URL (bench:wan puts a modelled long link between them). */
  agentKasUrl?: (kasUrl: string) => Promise<string>;
}

export async function startKubeProxySetup(
  config: Record<string, unknown>,
  adjust: (c: KasConfig) => void = () => {},
  options: KubeProxySetupOptions = {},
): Promise<KubeProxySetup> {
  const dir = await mkdtemp(join(tmpdir(), "kube-proxy-"));
  const kube = await startKubeApiServer();
  const secret = new Uint8Array(randomBytes(32));
  const gitlab = await GitLabApiServer.start({ secret });
  options.seed?.(gitlab);
  gitlab.addAgent(TOKEN, { agentId: 42, projectId: 7, agentName: "prod" });
  const repo = await GitRepo.init();
  await repo.commit({ ".gitlab/agents/prod/config.yaml": stringify(config) });
  const tokensFile = join(dir, "tokens.yaml");
  await writeFile(
    tokensFile,
    `${TOKEN}: {agentId: 42, projectId: 7, agentName: prod, repository: ${JSON.stringify(repo.path)}}\n`,
  );
  const secretFile = join(dir, "gitlab_secret");
  await writeFile(secretFile, Buffer.from(secret).toString("base64"));
  const pki = await testPki();
  await writeFile(join(dir, "kas.crt"), pki.cert);
  await writeFile(join(dir, "kas.key"), pki.key);
  const kas = await startInProcessKas((c) => {
    c.agent.staticTokensFile = tokensFile;
    c.gitlab.address = gitlab.url;
    c.gitlab.authenticationSecretFile = secretFile;
    c.agent.kubernetesApi.listen.certificateFile = join(dir, "kas.crt");
    c.agent.kubernetesApi.listen.keyFile = join(dir, "kas.key");
    adjust(c);
  });
  const agent = await startInProcessAgentk({
    kasUrl: options.agentKasUrl ? await options.agentKasUrl(kas.addresses.agent) : kas.addresses.agent,
    token: TOKEN,
    kubernetes: await kube.writeKubeconfig(join(dir, "agentk-kubeconfig")),
  });
  await agent.agent.client.ready(5000);
  // kas has read the agent's config.yaml once GitLab's API shows its commit.
  const jwt = await gitlabJwt(kas.apiSecret);
  await until(
    async () => {
      const res = await fetch(`${kas.addresses.api}/api/v1/agents/42/configuration`, {
        headers: { "gitlab-kas-api-request": jwt },
      });
      return res.ok && ((await res.json()) as { commit_id: string | null }).commit_id !== null;
    },
    10_000,
    "kas to read agent 42's configuration",
  );
  await gitlab.waitForConfigurations(1);
  return {
    kube,
    gitlab,
    kas,
    agent,
    repo,
    caCert: pki.caCert,
    async close() {
      await agent.stop();
      await kas.close();
      await gitlab.close();
      await kube.close();
      await repo.remove();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
