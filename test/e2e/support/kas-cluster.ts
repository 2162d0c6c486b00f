// kas as operators deploy it, for the end-to-end tests: replicas (processes) sharing a real Redis,
// behind a real haproxy (agents through its TCP frontend, GitLab's requests through its HTTP
// frontend, both health-checked against each replica's /readiness), one agentk (process) dialing
// haproxy. A replica can be replaced by a new process on the same ports, as a rolling restart does.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { type JsonLinesProcess, msg, spawnAgentk } from "../../agentk/support/processes.ts";
import { gitlabJwt, TOKEN, writeFixtures } from "../../kas/support/fixtures.ts";
import { type KasProcess, listenAddressOf, portsEnv, spawnKas } from "../../kas/support/kas-process.ts";
import { Haproxy } from "../../support/haproxy.ts";
import { RedisServer } from "../../support/redis-server.ts";
import { until } from "../../support/until.ts";
import { InClusterService } from "./in-cluster-service.ts";

export const SERVICE = "prometheus";
/** kas under tsx takes seconds to start, more on a machine busy with other test runs. */
const SPAWN_MS = 45_000;
/** The same in-cluster service under a second name: a request for it reuses no connection of the first. */
export const FRESH_SERVICE = "grafana";

export interface KasClusterOptions {
  /** Extra kas settings (environment), e.g. a short KAS_SHUTDOWN_GRACE_PERIOD. */
  kasEnv?: Record<string, string>;
  replicas?: number;
  /** haproxy's mode in front of the APIs for GitLab (`Haproxy`'s `httpFrontendMode`). Default `http`. */
  apiBalancing?: "http" | "tcp";
}

export class KasCluster {
  readonly kas: KasProcess[] = [];
  /** Each replica's listen addresses, kept for its replacement. */
  readonly #slots: Record<string, string>[] = [];
  #env: Record<string, string> = {};
  dir = "";
  files!: Awaited<ReturnType<typeof writeFixtures>>;
  redis!: RedisServer;
  haproxy!: Haproxy;
  agentk!: JsonLinesProcess;
  service!: InClusterService;

  static async start(options: KasClusterOptions = {}): Promise<KasCluster> {
    const cluster = new KasCluster();
    try {
      await cluster.#start(options);
    } catch (err) {
      await cluster.close();
      throw err;
    }
    return cluster;
  }

  async #start({ kasEnv = {}, replicas = 2, apiBalancing = "http" }: KasClusterOptions) {
    this.dir = await mkdtemp(join(tmpdir(), "e2e-cluster-"));
    this.files = await writeFixtures(this.dir);
    this.service = await InClusterService.start();
    this.redis = await RedisServer.start();
    this.#env = {
      KAS_AGENT_STATIC_TOKENS_FILE: this.files.tokensFile,
      KAS_API_LISTEN_AUTHENTICATION_SECRET_FILE: this.files.apiSecretFile,
      KAS_REDIS_SERVER_ADDRESS: `127.0.0.1:${this.redis.port}`,
      KAS_REDIS_KEY_PREFIX: "e2e-cluster",
      KAS_PRIVATE_API_LISTEN_AUTHENTICATION_SECRET_FILE: this.files.privateSecretFile,
      ...kasEnv,
    };
    const started = await Promise.all(
      Array.from({ length: replicas }, () =>
        spawnKas({ ...portsEnv(), ...this.#env }, { timeoutMs: SPAWN_MS }),
      ),
    );
    for (const k of started) {
      this.kas.push(k);
      // Where this replica listens: its replacement binds the same addresses.
      const a = k.addresses;
      this.#slots.push({
        KAS_AGENT_LISTEN_ADDRESS: listenAddressOf(a.agent),
        KAS_OBSERVABILITY_LISTEN_ADDRESS: listenAddressOf(a.observability),
        KAS_API_LISTEN_ADDRESS: listenAddressOf(a.api!),
        KAS_AGENT_KUBERNETES_API_LISTEN_ADDRESS: listenAddressOf(a.kubernetesApi),
        KAS_PRIVATE_API_LISTEN_ADDRESS: listenAddressOf(a.privateApi!),
      });
    }
    const healthUrl = (k: KasProcess) => `${k.addresses.observability}/readiness`;
    this.haproxy = await Haproxy.start({
      backends: this.kas.map((k) => ({
        address: listenAddressOf(k.addresses.agent),
        healthUrl: healthUrl(k),
      })),
      httpBackends: this.kas.map((k) => ({
        address: listenAddressOf(k.addresses.api!),
        healthUrl: healthUrl(k),
      })),
      httpFrontendMode: apiBalancing,
    });
    const tokenFile = join(this.dir, "token");
    await writeFile(tokenFile, TOKEN);
    this.agentk = spawnAgentk(
      [
        "--kas-address",
        this.haproxy.url,
        "--token-file",
        tokenFile,
        "--service",
        `${SERVICE}=${this.service.url}`,
        "--service",
        `${FRESH_SERVICE}=${this.service.url}`,
      ],
      {
        AGENTK_OBSERVABILITY_LISTEN_ADDRESS: "127.0.0.1:0",
        POD_NAME: "agentk-e2e",
        POD_NAMESPACE: "gitlab-agent",
      },
    );
    await this.agentk.waitFor(msg("connected to kas"), 1, SPAWN_MS);
  }

  /** Starts replica `i` again, on its old ports (after it exited). */
  async restart(i: number): Promise<KasProcess> {
    const k = await spawnKas({ ...this.#env, ...this.#slots[i]! }, { timeoutMs: SPAWN_MS });
    this.kas[i] = k;
    return k;
  }

  /** Which replicas log the agent's tunnel as connected (and how many times). */
  connections(k: KasProcess): number {
    return k
      .out()
      .split("\n")
      .filter((l) => l.includes('"msg":"agent connected"')).length;
  }

  /** The index of the replica that logged the agent's tunnel (waiting for its log line). */
  async holder(): Promise<number> {
    await until(
      () => this.kas.some((k) => this.connections(k) > 0),
      10_000,
      "a replica logging the agent's tunnel",
    );
    return this.kas.findIndex((k) => this.connections(k) > 0);
  }

  /** A request to kas's API for GitLab, through haproxy (`base` another URL: straight to a replica). */
  async api(path: string, init: { signal?: AbortSignal; base?: string } = {}): Promise<Response> {
    return fetch(`${init.base ?? this.haproxy.httpUrl}${path}`, {
      headers: { "gitlab-kas-api-request": await gitlabJwt(this.files.apiSecret) },
      ...(init.signal && { signal: init.signal }),
    });
  }

  async close(): Promise<void> {
    this.agentk?.kill();
    for (const k of this.kas) k.kill();
    await this.haproxy?.close();
    await this.redis?.close();
    this.service?.close();
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
  }
}

/** One request of a load loop: when it started, whether it was served right, what came back. */
export interface LoadResult {
  at: number;
  ms: number;
  /** Which of the load's clients sent it. */
  client: number;
  ok: boolean;
  detail: string;
}

/**
 * `clients` loops sending `request` until `stop()`, each with its own deadline per request (a
 * request hanging past it is a failure): back to back, or one every `intervalMs` (a client's next
 * request starts that long after its last one started, or as soon as it ended if it took longer).
 */
export function startLoad(
  clients: number,
  request: (signal: AbortSignal, client: number) => Promise<{ ok: boolean; detail: string }>,
  requestTimeoutMs = 15_000,
  intervalMs = 0,
): { results: LoadResult[]; stop(): Promise<void> } {
  const results: LoadResult[] = [];
  let running = true;
  const loop = async (_: unknown, client: number) => {
    let next = Date.now();
    while (running) {
      // Pacing a load, not waiting for an event.
      if (intervalMs > 0) await delay(Math.max(0, next - Date.now()));
      const at = Date.now();
      next = at + intervalMs;
      try {
        const { ok, detail } = await request(AbortSignal.timeout(requestTimeoutMs), client);
        results.push({ at, ms: Date.now() - at, client, ok, detail });
      } catch (err) {
        const e = err as Error & { cause?: Error & { code?: string } };
        results.push({
          at,
          ms: Date.now() - at,
          client,
          ok: false,
          detail: `${e.message}: ${e.cause?.code ?? ""} ${e.cause?.message ?? ""}`,
        });
      }
    }
  };
  const loops = Array.from({ length: clients }, loop);
  return {
    results,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}
