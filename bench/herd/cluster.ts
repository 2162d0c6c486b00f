// What bench:herd runs against: a real redis-server, the GitLab and Gitaly test servers (agents'
// configuration projects and one GitOps manifest project as bare repositories Gitaly serves), two
// kas replicas (processes from the build, so one can be killed) sharing Redis behind haproxy, and a probe agentk
// with a Kubernetes test server, connected straight to the replica that survives.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, renameSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { writeFixtures } from "../../test/kas/support/fixtures.ts";
import { type KasProcess, listenAddressOf, portsEnv, spawnKas } from "../../test/kas/support/kas-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../test/support/agentk-in-process.ts";
import { GitRepo } from "../../test/support/git-repo.ts";
import { GitalyTestServer } from "../../test/support/gitaly-server.ts";
import { GitLabApiServer } from "../../test/support/gitlab-api.ts";
import { Haproxy } from "../../test/support/haproxy.ts";
import { type KubeApiServer, startKubeApiServer } from "../../test/support/kube-apiserver.ts";
import { RedisServer } from "../../test/support/redis-server.ts";
import { makeConfigRepos, makeManifestRepos } from "../lib/agent-repos.ts";
import { MANIFEST_PROJECT } from "../scale/agent-modules.ts";

export const PROBE_TOKEN = "bench-herd-probe-token-0123456789";
/** kas under tsx takes seconds to start, more on a busy machine. */
const SPAWN_MS = 90_000;

export interface HerdCluster {
  tokens: string[];
  configProjects: number;
  redis: RedisServer;
  gitlab: GitLabApiServer;
  gitaly: GitalyTestServer;
  kas: KasProcess[];
  /** One haproxy per `agentsPerHaproxy` agents, each in front of both replicas. */
  haproxies: Haproxy[];
  kube: KubeApiServer;
  probe: InProcessAgentk;
  close(): Promise<void>;
}

export interface HerdClusterOptions {
  dir: string;
  agents: number;
  /** Agents per configuration project (bench:scale groups 100): each project holds their config files. */
  agentsPerProject: number;
  /** Agents per haproxy (two descriptors each, under the open-files limit): more get more haproxies. */
  agentsPerHaproxy: number;
  /** agent.info_cache_ttl, e.g. "300s". */
  infoCacheTtl: string;
  log: (line: string) => void;
  /** kas's agent.listen.handshake_loop_utilization (default: kas's). */
  handshakeLoopUtilization?: string;
  /** kas's entry point: the build (bench/lib/kas-build.ts), as operators run it. */
  kasEntry: string;
  /** More environment for both replicas (--kas-env). */
  kasEnv?: Record<string, string>;
  /** More environment for replica 1, the one that survives (a profiler preload, say), over kasEnv. */
  survivorEnv?: Record<string, string>;
  /** CPUs replica 1 runs on, all its threads (taskset's list, e.g. "0-3"); default: not pinned. */
  survivorCpus?: string;
}

export async function startHerdCluster(o: HerdClusterOptions): Promise<HerdCluster> {
  const closers: Array<() => unknown> = [];
  const close = async () => {
    for (const c of closers.reverse())
      await Promise.resolve()
        .then(c)
        .catch(() => {});
  };
  try {
    const configProjects = Math.max(1, Math.ceil(o.agents / o.agentsPerProject));
    // Gitaly's storage "default" is `dir`: configuration projects at config-repos/config-<r>.git
    // (agent i, named bench-<i+1>, in project i % n), the manifest project at bench/manifests.git.
    makeConfigRepos(o.dir, configProjects, o.agents);
    const [manifests] = makeManifestRepos(o.dir, 1);
    mkdirSync(join(o.dir, "bench"), { recursive: true });
    renameSync(manifests!, join(o.dir, `${MANIFEST_PROJECT}.git`));
    const gitaly = await GitalyTestServer.start({ storages: { default: o.dir } });
    closers.push(() => gitaly.close());

    const secret = new Uint8Array(randomBytes(32));
    const gitlab = await GitLabApiServer.start({ secret });
    closers.push(() => gitlab.close());
    const tokens = Array.from(
      { length: o.agents },
      (_, i) => `glagent-herd-${String(i).padStart(6, "0")}-${randomBytes(8).toString("hex")}`,
    );
    tokens.forEach((token, i) => {
      const r = i % configProjects;
      gitlab.addAgent(token, {
        agentId: i + 1,
        projectId: 100_000 + r,
        agentName: `bench-${i + 1}`,
        projectPath: `config-repos/config-${r}`,
        gitalyAddress: gitaly.address,
      });
    });
    gitlab.addProject({ projectId: 99_999, path: MANIFEST_PROJECT, gitalyAddress: gitaly.address });

    const redis = await RedisServer.start();
    closers.push(() => redis.close());

    // The probe agent: a static token (no GitLab), its configuration a local repository.
    const files = await writeFixtures(o.dir);
    const probeRepo = await GitRepo.init();
    closers.push(() => probeRepo.remove());
    await probeRepo.commit({
      ".gitlab/agents/probe/config.yaml": "observability:\n  logging:\n    level: info\n",
    });
    const tokensFile = join(o.dir, "herd-static-tokens.yaml");
    await writeFile(
      tokensFile,
      `${PROBE_TOKEN}: {agentId: 900001, projectId: 900001, agentName: probe, repository: ${JSON.stringify(probeRepo.path)}}\n`,
    );
    const secretFile = join(o.dir, "gitlab_secret");
    await writeFile(secretFile, Buffer.from(secret).toString("base64"));
    const env = {
      KAS_GITLAB_ADDRESS: gitlab.url,
      KAS_GITLAB_AUTHENTICATION_SECRET_FILE: secretFile,
      KAS_AGENT_STATIC_TOKENS_FILE: tokensFile,
      KAS_AGENT_INFO_CACHE_TTL: o.infoCacheTtl,
      KAS_API_LISTEN_AUTHENTICATION_SECRET_FILE: files.apiSecretFile,
      KAS_PRIVATE_API_LISTEN_AUTHENTICATION_SECRET_FILE: files.privateSecretFile,
      KAS_REDIS_SERVER_ADDRESS: `127.0.0.1:${redis.port}`,
      KAS_REDIS_KEY_PREFIX: "bench-herd",
      ...(o.handshakeLoopUtilization !== undefined && {
        KAS_AGENT_LISTEN_HANDSHAKE_LOOP_UTILIZATION: o.handshakeLoopUtilization,
      }),
      // As bench:scale --modules: the first reads of thousands of agents at kas's default 15 Gitaly
      // calls/s per server would take minutes.
      ...Object.fromEntries(
        ["GLOBAL", "PER_SERVER"].flatMap((s) => [
          [`KAS_GITALY_${s}_API_RATE_LIMIT_REFILL_RATE_PER_SECOND`, "1000"],
          [`KAS_GITALY_${s}_API_RATE_LIMIT_BUCKET_SIZE`, "2000"],
        ]),
      ),
    };
    o.log("  starting two kas replicas");
    const kas = await Promise.all(
      [0, 1].map((i) =>
        spawnKas(
          { ...portsEnv(), ...env, ...o.kasEnv, ...(i === 1 && o.survivorEnv) },
          {
            timeoutMs: SPAWN_MS,
            entry: o.kasEntry,
          },
        ),
      ),
    );
    for (const k of kas) closers.push(() => k.kill());
    if (o.survivorCpus) {
      // taskset's own message (no such CPU, say) goes to stderr with the failure.
      execFileSync("taskset", ["-a", "-p", "-c", o.survivorCpus, String(kas[1]!.child.pid)], {
        stdio: ["ignore", "ignore", "inherit"],
      });
      o.log(`  replica 1 (the survivor) pinned to CPUs ${o.survivorCpus}`);
    }
    const count = Math.ceil(o.agents / o.agentsPerHaproxy);
    const haproxies: Haproxy[] = [];
    for (let i = 0; i < count; i++) {
      const haproxy = await Haproxy.start({
        backends: kas.map((k) => ({
          address: listenAddressOf(k.addresses.agent),
          healthUrl: `${k.addresses.observability}/readiness`,
        })),
        maxConnections: Math.ceil(o.agents / count) + 1000,
      });
      closers.push(() => haproxy.close());
      haproxies.push(haproxy);
    }

    const kube = await startKubeApiServer();
    closers.push(() => kube.close());
    for (let i = 0; i < 20; i++) {
      kube.store.create("pods", "default", {
        metadata: { name: `web-${i}`, labels: { app: "web" } },
        spec: { containers: [{ name: "main", image: "nginx" }] },
        status: { phase: "Running" },
      });
    }
    // On replica 1, the one that survives.
    const probe = await startInProcessAgentk({
      kasUrl: kas[1]!.addresses.agent,
      token: PROBE_TOKEN,
      kubernetes: await kube.writeKubeconfig(join(o.dir, "probe-kubeconfig")),
    });
    closers.push(() => probe.stop());
    await probe.agent.client.ready(30_000);
    return { tokens, configProjects, redis, gitlab, gitaly, kas, haproxies, kube, probe, close };
  } catch (err) {
    await close();
    throw err;
  }
}
