// Each agent's configuration as kas has it, for the kas modules that act on it (the Kubernetes API
// proxy's ci_access / user_access): the agent configuration module reads the files and installs
// the lookup while it is built; the others ask at request time, on whichever replica serves them.
import type { AgentConfiguration } from "./agentk.ts";

export type ConfigurationLookup = (agentId: string) => Promise<AgentConfiguration | undefined>;

export class AgentConfigurations {
  #lookup: ConfigurationLookup | undefined;

  /** Installed once, by the module that reads agent configuration. */
  provide(lookup: ConfigurationLookup): void {
    if (this.#lookup !== undefined) throw new Error("agent configurations are already provided");
    this.#lookup = lookup;
  }

  /**
   * The newest configuration any replica read for the agent; undefined when none did (the agent
   * is not connected, its file was not read yet, or no module reads configuration).
   */
  get(agentId: string): Promise<AgentConfiguration | undefined> {
    return this.#lookup?.(agentId) ?? Promise.resolve(undefined);
  }
}
