// Where GitLab's API finds an agent's configuration state, whichever replica polls for it: Redis
// when kas has it (each replica writes the states of the agents connected to it, with a TTL that
// outlives a few polls), this replica's own watches otherwise.
import type { Logger } from "../../../tool/observability/index.ts";
import type { KasRedis } from "../../runtime/index.ts";
import type { AgentConfigurationState } from "./state.ts";

export interface StatusStore {
  put(state: AgentConfigurationState): void;
  /** The newest state any replica wrote; undefined when no replica watches for the agent. */
  get(agentId: string): Promise<AgentConfigurationState | undefined>;
}

export class LocalStatusStore implements StatusStore {
  constructor(private readonly stateOf: (agentId: string) => AgentConfigurationState | undefined) {}
  put(): void {}
  async get(agentId: string): Promise<AgentConfigurationState | undefined> {
    return this.stateOf(agentId);
  }
}

export class RedisStatusStore implements StatusStore {
  readonly #failing = { logged: false };

  constructor(
    private readonly redis: KasRedis,
    private readonly ttlMs: number,
    private readonly local: LocalStatusStore,
    private readonly log: Logger,
  ) {}

  #key(agentId: string): string {
    return `${this.redis.keyPrefix}agent_configuration:${agentId}`;
  }

  put(state: AgentConfigurationState): void {
    if (state.commitId === undefined && state.problem === undefined) return; // nothing known yet
    this.redis.client.set(this.#key(state.agentId), JSON.stringify(state), "PX", this.ttlMs).then(
      () => {
        this.#failing.logged = false;
      },
      (err: unknown) => {
        // Once per outage: the poll loop writes for every agent.
        if (this.#failing.logged) return;
        this.#failing.logged = true;
        this.log.warn({ err: (err as Error).message }, "cannot store agent configuration state in Redis");
      },
    );
  }

  async get(agentId: string): Promise<AgentConfigurationState | undefined> {
    const here = await this.local.get(agentId);
    if (here?.commitId !== undefined) return here;
    const text = await this.redis.client.get(this.#key(agentId));
    return text === null ? here : (JSON.parse(text) as AgentConfigurationState);
  }
}
