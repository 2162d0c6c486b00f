// What GitLab's API shows of an agent's manifest projects, whichever replica served the agent: the
// last commit kas sent, the last sync the agent reported, the last refusal (or repository problem)
// of kas's. Redis when kas has it (one hash per agent, a field per project and part, so replicas
// never read-modify-write; the key expires `ttlMs` after its last write), memory otherwise.
import type { Logger } from "../../../tool/observability/index.ts";
import type { KasRedis } from "../../runtime/index.ts";

export interface SentCommit {
  commitId: string;
  /** GitLab's numeric id ("" when unknown). */
  projectId: string;
  files: number;
  bytes: number;
  at: string;
}

export interface KasProblem {
  /** `refused`: a refusal or a limit (the stream ended with `code`); `repository`: a poll failed. */
  kind: "refused" | "repository";
  /** gRPC status name, e.g. RESOURCE_EXHAUSTED. */
  code?: string;
  message: string;
  commitId?: string;
  at: string;
}

export interface ObjectResultRecord {
  group: string;
  kind: string;
  namespace: string;
  name: string;
  status: string;
  error?: string;
  source?: string;
}

export interface SyncReport {
  commitId: string;
  durationMs: number;
  mode: "apply" | "dry_run";
  error?: string;
  /** How many objects of each status. */
  counts: Record<string, number>;
  objects: ObjectResultRecord[];
  at: string;
}

export interface ProjectStatus {
  sent?: SentCommit;
  sync?: SyncReport;
  problem?: KasProblem;
}

type Part = keyof ProjectStatus;
const PARTS: readonly Part[] = ["sent", "sync", "problem"];

export interface GitopsStatusStore {
  put<P extends Part>(
    agentId: string,
    project: string,
    part: P,
    value: NonNullable<ProjectStatus[P]>,
  ): Promise<void>;
  clear(agentId: string, project: string, part: Part): Promise<void>;
  /** Every manifest project of the agent any replica wrote about (not expired), by name. */
  get(agentId: string): Promise<Map<string, ProjectStatus>>;
}

/** Bounds: agents and projects per agent kept in memory (the oldest agent goes first). */
const MAX_AGENTS = 10_000;
const MAX_PROJECTS_PER_AGENT = 256;

export class MemoryStatusStore implements GitopsStatusStore {
  readonly #agents = new Map<string, { projects: Map<string, ProjectStatus>; expiresAt: number }>();

  constructor(private readonly ttlMs: number) {}

  async put<P extends Part>(agentId: string, project: string, part: P, value: NonNullable<ProjectStatus[P]>) {
    const agent = this.#agent(agentId);
    let status = agent.projects.get(project);
    if (!status) {
      if (agent.projects.size >= MAX_PROJECTS_PER_AGENT)
        agent.projects.delete(agent.projects.keys().next().value!);
      status = {};
      agent.projects.set(project, status);
    }
    status[part] = value;
  }

  async clear(agentId: string, project: string, part: Part) {
    const status = this.#agents.get(agentId)?.projects.get(project);
    if (status) delete status[part];
  }

  async get(agentId: string): Promise<Map<string, ProjectStatus>> {
    const agent = this.#agents.get(agentId);
    if (!agent || agent.expiresAt <= Date.now()) return new Map();
    return new Map([...agent.projects].map(([p, s]) => [p, { ...s }]));
  }

  #agent(agentId: string) {
    let agent = this.#agents.get(agentId);
    this.#agents.delete(agentId);
    if (!agent || agent.expiresAt <= Date.now()) agent = { projects: new Map(), expiresAt: 0 };
    agent.expiresAt = Date.now() + this.ttlMs;
    this.#agents.set(agentId, agent);
    while (this.#agents.size > MAX_AGENTS) this.#agents.delete(this.#agents.keys().next().value!);
    return agent;
  }
}

export class RedisStatusStore implements GitopsStatusStore {
  #failingLogged = false;

  constructor(
    private readonly redis: KasRedis,
    private readonly ttlMs: number,
    private readonly log: Logger,
  ) {}

  #key(agentId: string): string {
    return `${this.redis.keyPrefix}gitops:${agentId}`;
  }

  async put<P extends Part>(agentId: string, project: string, part: P, value: NonNullable<ProjectStatus[P]>) {
    const key = this.#key(agentId);
    const field = `${part}\0${project}`;
    await this.#write(async () => {
      // Bounded like the memory store: an agent naming ever new projects cannot grow its hash.
      const [exists, size] = await Promise.all([
        this.redis.client.hexists(key, field),
        this.redis.client.hlen(key),
      ]);
      if (!exists && size >= MAX_PROJECTS_PER_AGENT * PARTS.length) return;
      await this.redis.client.multi().hset(key, field, JSON.stringify(value)).pexpire(key, this.ttlMs).exec();
    });
  }

  async clear(agentId: string, project: string, part: Part) {
    await this.#write(() => this.redis.client.hdel(this.#key(agentId), `${part}\0${project}`));
  }

  async get(agentId: string): Promise<Map<string, ProjectStatus>> {
    const fields = await this.redis.client.hgetall(this.#key(agentId));
    const out = new Map<string, ProjectStatus>();
    for (const [field, text] of Object.entries(fields)) {
      const at = field.indexOf("\0");
      const part = field.slice(0, at) as Part;
      if (at < 0 || !PARTS.includes(part)) continue;
      const project = field.slice(at + 1);
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        continue;
      }
      const status = out.get(project) ?? {};
      (status as Record<Part, unknown>)[part] = value;
      out.set(project, status);
    }
    return out;
  }

  /** A lost write is logged once per outage; the stream or the report it belongs to goes on. */
  async #write(op: () => Promise<unknown>): Promise<void> {
    try {
      await op();
      this.#failingLogged = false;
    } catch (err) {
      if (this.#failingLogged) return;
      this.#failingLogged = true;
      this.log.warn({ err: (err as Error).message }, "cannot store GitOps status in Redis");
    }
  }
}
