// kas tells GitLab each agent's configuration file, as GitLab's kas does (agent_configuration):
// GitLab keeps its copy of the agent's ci_access and user_access from it. Posted when kas first
// reads an agent's file and at every new commit, once per agent and commit across replicas; in the
// background, so the agent's configuration feed never waits on GitLab.
import type { Counter } from "prom-client";
import type { Logger } from "../../../tool/observability/index.ts";
import { type AgentConfiguration, configurationFileProtoJson } from "../../agentcfg/index.ts";
import type { KasRedis } from "../../runtime/index.ts";
import type { AgentConfigurationState } from "./state.ts";

/** Sends one agent's configuration to GitLab (tool/gitlab's postAgentConfiguration, with its retries). */
export type PostConfiguration = (
  agentId: string,
  agentConfig: Record<string, unknown>,
  signal: AbortSignal,
) => Promise<void>;

/** Which replica posts an agent's commit: the first to claim it. */
export interface PostClaims {
  /** True when this replica is to post (nobody claimed it yet). */
  claim(agentId: string, commitId: string): Promise<boolean>;
  /** The post failed: whoever polls next may try again. */
  release(agentId: string, commitId: string): Promise<void>;
}

/** One replica: the poster's own memory already says what was posted. */
export const LOCAL_CLAIMS: PostClaims = {
  claim: async () => true,
  release: async () => {},
};

/**
 * Claims in Redis (`SET NX`), shared by the replicas. The TTL only has to outlive the moment the
 * replicas polling for one agent read its new commit (each remembers its own posts after that);
 * a replica started later posts the commit once more, which GitLab takes as the same.
 */
export class RedisPostClaims implements PostClaims {
  constructor(
    private readonly redis: KasRedis,
    private readonly ttlSeconds: number,
  ) {}

  #key(agentId: string, commitId: string): string {
    return `${this.redis.keyPrefix}agent_configuration_posted:${agentId}:${commitId}`;
  }

  async claim(agentId: string, commitId: string): Promise<boolean> {
    const set = await this.redis.client.set(this.#key(agentId, commitId), "1", "EX", this.ttlSeconds, "NX");
    return set === "OK";
  }

  async release(agentId: string, commitId: string): Promise<void> {
    await this.redis.client.del(this.#key(agentId, commitId));
  }
}

export interface PosterOptions {
  post: PostConfiguration;
  claims: PostClaims;
  /** Posts by result: posted, elsewhere (another replica's), not_found (agent deleted in GitLab), failed. */
  posts: Counter<"result">;
  log: Logger;
  /** Agents whose posted commit is remembered (the oldest is forgotten first). Default 10 000. */
  maxAgents?: number;
}

export class ConfigurationPoster {
  readonly #o: PosterOptions;
  /** agent id -> the commit posted (or being posted) for it; insertion order is age. */
  readonly #posted = new Map<string, string>();
  readonly #abort = new AbortController();
  /** Redis failing is logged once per outage, not once per agent. */
  #claimsFailing = false;

  constructor(options: PosterOptions) {
    this.#o = options;
  }

  /** A state from the watches: posts its configuration if its commit is new for the agent. */
  offer(state: AgentConfigurationState): void {
    const { agentId, commitId } = state;
    // Not read yet, or no commit (an empty repository, no repository): GitLab's kas posts nothing
    // either. A refused file keeps the previous commit, so it is not posted.
    if (commitId === undefined || commitId === "" || this.#abort.signal.aborted) return;
    if (this.#posted.get(agentId) === commitId) return;
    this.#posted.delete(agentId);
    this.#posted.set(agentId, commitId);
    if (this.#posted.size > (this.#o.maxAgents ?? 10_000)) {
      this.#posted.delete(this.#posted.keys().next().value!);
    }
    void this.#post(agentId, commitId, state.configuration);
  }

  close(): void {
    this.#abort.abort();
  }

  async #post(agentId: string, commitId: string, configuration: AgentConfiguration): Promise<void> {
    const { claims, posts, log } = this.#o;
    const signal = this.#abort.signal;
    let claimed: boolean;
    try {
      claimed = await claims.claim(agentId, commitId);
      this.#claimsFailing = false;
    } catch (err) {
      // Without Redis nobody can say who posts: post (GitLab takes a repeat as the same).
      if (!this.#claimsFailing)
        log.warn({ err: (err as Error).message }, "cannot claim agent configuration post in Redis; posting");
      this.#claimsFailing = true;
      claimed = true;
    }
    if (!claimed) {
      posts.inc({ result: "elsewhere" });
      return;
    }
    try {
      await this.#o.post(agentId, configurationFileProtoJson(configuration), signal);
      posts.inc({ result: "posted" });
    } catch (err) {
      if (signal.aborted) return;
      const notFound = (err as { kind?: string }).kind === "not_found";
      posts.inc({ result: notFound ? "not_found" : "failed" });
      log.warn(
        { agentId, commitId, err: (err as Error).message },
        notFound
          ? "GitLab does not know the agent (deleted?): its configuration was not posted"
          : "cannot post agent configuration to GitLab; the next poll tries again",
      );
      // A deleted agent stays deleted: not asked again for this commit. Otherwise forget it, so the
      // next poll (or another replica's) tries again.
      if (notFound) return;
      if (this.#posted.get(agentId) === commitId) this.#posted.delete(agentId);
      await claims.release(agentId, commitId).catch(() => {});
    }
  }
}
