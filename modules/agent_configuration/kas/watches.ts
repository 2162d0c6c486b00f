// Polling agents' configuration projects. One watch per repository, shared by every agent whose
// configuration lives there: each poll is one cheap ref lookup, and the agents' files are read only
// when the commit moved. A watch's only agent reads its own file (one call); with more agents the
// files are read together (project-files.ts: a listing and a batch) and kept for that commit, so
// agents that join later (a reconnecting herd) cost no call. A push notification polls at once;
// polling stays the fallback.
import type { Logger } from "../../../tool/observability/index.ts";
import {
  type AgentConfiguration,
  AgentConfigurationError,
  EMPTY_AGENT_CONFIGURATION,
  parseAgentConfiguration,
  unsupportedSections,
} from "../../agentcfg/index.ts";
import {
  type AgentInfo,
  agentRepository,
  type PolledWatch,
  PollWatches,
  type PushedProject,
  RepositoryError,
  type RepositoryReader,
  repositoryKey,
} from "../../runtime/index.ts";
import type { ConfigurationMetrics } from "./metrics.ts";
import { type ProjectFiles, readProjectFiles } from "./project-files.ts";
import { type AgentConfigurationState, type ConfigurationProblem, configurationPath } from "./state.ts";

export interface WatchesOptions {
  repositories: RepositoryReader;
  pollPeriodMs: number;
  maxFileBytes: number;
  /**
   * The agent files of one project at one commit, together, that a watch reads in one call and keeps
   * (default 1 MiB); a project over it is read per agent.
   */
  maxProjectBytes?: number;
  metrics: ConfigurationMetrics;
  log: Logger;
  /** Every change of an agent's state (and every poll that reached the repository). */
  onState?: (state: AgentConfigurationState) => void;
  /** For tests: where a new watch's first poll falls in the period when its agent already has a configuration. */
  random?: () => number;
  /**
   * How long an agent's state outlives its last stream (default 60 s): an agent between two
   * tunnels keeps its watch, its state on the API, and the pushes made meanwhile.
   */
  lingerMs?: number;
}

type Listener = (state: AgentConfigurationState) => void;

/** What one read of an agent's file gave: a configuration, or a refusal. */
type FileRead =
  | { configuration: AgentConfiguration; refusal?: undefined }
  | { configuration?: undefined; refusal: ConfigurationProblem };

interface AgentEntry {
  /** The newest of what the agent's tunnels said about it (a rotated Gitaly token included). */
  agent: AgentInfo;
  state: AgentConfigurationState;
  /** The refusal of the file at `readAt`, kept apart so a repository problem cannot erase it. */
  refusal: ConfigurationProblem | undefined;
  listeners: Set<Listener>;
  /** The commit whose file this agent's state reflects (read, or refused); undefined: not read. */
  readAt: string | undefined;
  /** Set while nobody listens: the entry goes when it fires. */
  linger: NodeJS.Timeout | undefined;
}

interface Watch extends PolledWatch {
  agents: Map<string, AgentEntry>;
  /** The commit the last poll found ("" for none); undefined before the first. */
  commit: string | undefined;
  /** Why the last poll failed (for the health detail); undefined when it succeeded. */
  failing: string | undefined;
  /**
   * The agents' files at `commit` (read, or being read: joined by every agent that needs them).
   * Only the watch's commit: dropped when it moves, and when the read fails.
   */
  files: { commit: string; read: Promise<ProjectFiles> } | undefined;
}

/** Agents whose last reported commit is remembered (the oldest forgotten first). */
const MAX_REPORTED_AGENTS = 10_000;
const DEFAULT_MAX_PROJECT_BYTES = 1024 * 1024;
/** Configuration files one batch reads at most (readFiles takes a few thousand paths). */
const MAX_BATCH_FILES = 1000;
/** Oversized files left out of a batch one at a time (each one more call) before reading per agent. */
const MAX_OVERSIZED = 3;

export class ConfigurationWatches extends PollWatches<Watch> {
  readonly #o: WatchesOptions;
  /** Agent id -> the commit whose unsupported sections were last logged and counted. */
  readonly #reported = new Map<string, string>();

  constructor(options: WatchesOptions) {
    super(options, "agent configuration");
    this.#o = options;
  }

  /** Watches whose last poll could not reach their repository: key -> reason. */
  failing(): Map<string, string> {
    const out = new Map<string, string>();
    for (const w of this.watches()) if (w.failing !== undefined) out.set(w.key, w.failing);
    return out;
  }

  /** The state of an agent this replica watches for. */
  stateOf(agentId: string): AgentConfigurationState | undefined {
    for (const w of this.watches()) {
      for (const e of w.agents.values()) if (e.agent.agentId === agentId) return e.state;
    }
    return undefined;
  }

  /**
   * Delivers the agent's configuration state to `listener` now (if known) and on every change,
   * until the returned function is called. `agentHas`: the commit the agent already has ("" for
   * none): an agent with a configuration does not need a poll at once, so after a kas restart the
   * first polls of its reconnecting agents spread over the period instead of all at once.
   */
  subscribe(agent: AgentInfo, agentHas: string, listener: Listener): () => void {
    const location = agentRepository(agent);
    if (location === undefined) {
      // No project to read (e.g. a static token without a repository): the empty configuration.
      this.#deliver(listener, {
        agentId: agent.agentId,
        configuration: EMPTY_AGENT_CONFIGURATION,
        commitId: "",
      });
      return () => {};
    }
    const { watch, fresh } = this.open(repositoryKey(location), (loop) => ({
      key: repositoryKey(location),
      location,
      agents: new Map(),
      loop,
      commit: undefined,
      failing: undefined,
      files: undefined,
    }));
    watch.location = location;
    let entry = watch.agents.get(agent.agentName);
    if (!entry) {
      entry = {
        agent,
        state: { agentId: agent.agentId, configuration: EMPTY_AGENT_CONFIGURATION, commitId: undefined },
        refusal: undefined,
        listeners: new Set(),
        readAt: undefined,
        linger: undefined,
      };
      watch.agents.set(agent.agentName, entry);
    } else if (entry.state.commitId !== undefined) {
      this.#deliver(listener, entry.state);
    }
    entry.agent = agent;
    clearTimeout(entry.linger);
    entry.linger = undefined;
    entry.listeners.add(listener);

    if (entry.readAt === undefined && watch.commit !== undefined) {
      // The repository's commit is known (another agent's poll): this agent's file, at once.
      void this.#refresh(watch, entry, watch.commit);
    } else if (agentHas === "" && entry.readAt === undefined) {
      void watch.loop.now();
    } else if (fresh) {
      watch.loop.in(Math.floor(this.#random() * this.#o.pollPeriodMs));
    }

    const w = watch;
    const e = entry;
    return () => {
      e.listeners.delete(listener);
      if (e.listeners.size > 0 || e.linger !== undefined) return;
      this.#linger(w, agent.agentName, e);
    };
  }

  /**
   * The entry goes after the linger time unless a stream comes back. The timer's closure is made
   * here, not in the unsubscribe function: there it would share that scope's `listener`, and with
   * it hold the departed stream and its whole tunnel for the linger time.
   */
  #linger(watch: Watch, agentName: string, entry: AgentEntry): void {
    entry.linger = setTimeout(() => this.#forget(watch, agentName, entry), this.#o.lingerMs ?? 60_000);
  }

  /** A push to `project` polls every watch holding one of its agents. */
  protected follows(watch: Watch, project: PushedProject): boolean {
    return [...watch.agents.values()].some(({ agent }) =>
      project.id !== undefined
        ? agent.projectId === project.id
        : project.fullPath !== undefined && agent.gitalyRepository?.glProjectPath === project.fullPath,
    );
  }

  protected override released(watch: Watch): void {
    for (const e of watch.agents.values()) clearTimeout(e.linger);
  }

  #forget(watch: Watch, agentName: string, entry: AgentEntry): void {
    if (watch.agents.get(agentName) !== entry) return;
    watch.agents.delete(agentName);
    if (watch.agents.size === 0) this.remove(watch);
  }

  #random(): number {
    return (this.#o.random ?? Math.random)();
  }

  /** One poll: true when the repository was reached and every agent's file read. */
  protected async poll(watch: Watch): Promise<boolean> {
    const first = watch.agents.values().next().value;
    if (!first || this.signal.aborted) return true;
    // Rate limits are kept per agent: the ref lookup is charged to one of the agents it serves.
    const ctx = { agentId: first.agent.agentId, signal: this.signal };
    let commit: string;
    try {
      commit = (await this.#o.repositories.resolveRef(watch.location, {}, ctx)) ?? "";
    } catch (err) {
      if (this.signal.aborted) return true;
      this.#repositoryFailed(watch, err);
      return false;
    }
    watch.commit = commit;
    if (watch.files?.commit !== commit) watch.files = undefined; // nobody goes back to an older commit
    if (commit !== "" && this.#together(watch, commit)) {
      // The files together, once for all the agents (charged to the ref lookup's; kept, they cost
      // nothing). Failing, every agent keeps what it has; read per agent (below), each file's
      // failure is its own.
      try {
        await this.#filesAt(watch, commit, ctx.agentId);
      } catch (err) {
        if (this.signal.aborted) return true;
        this.#repositoryFailed(watch, err);
        return false;
      }
    }
    let changed = false;
    let failure: unknown;
    for (const entry of [...watch.agents.values()]) {
      if (entry.readAt !== commit) changed = true;
      // One agent's file failing to read does not hold up the others'.
      const error = await this.#refresh(watch, entry, commit);
      failure ??= error;
    }
    if (this.signal.aborted) return true;
    if (failure !== undefined) {
      this.#repositoryFailed(watch, failure);
      return false;
    }
    watch.failing = undefined;
    this.reached(changed);
    return true;
  }

  /**
   * Brings one agent's state to `commit` (reading its file if it moved). Returns the repository's
   * error if the file could not be read (the state then stays as it was).
   */
  async #refresh(watch: Watch, entry: AgentEntry, commit: string): Promise<unknown> {
    const checkedAt = new Date().toISOString();
    if (entry.readAt === commit) {
      // Reached again: a repository problem is over; a refused file stays refused.
      const { problem: _, ...state } = entry.state;
      this.#publish(entry, { ...state, ...(entry.refusal && { problem: entry.refusal }), checkedAt });
      return undefined;
    }
    let read: FileRead;
    try {
      read = await this.#read(watch, entry.agent, commit);
    } catch (err) {
      return err;
    }
    // A read that lost a race with a newer poll's (the commit moved meanwhile) is dropped: the
    // agent must never step back to an older commit.
    if (watch.commit !== commit) return undefined;
    entry.readAt = commit;
    entry.refusal = read.refusal;
    const state: AgentConfigurationState = read.refusal
      ? { ...entry.state, problem: read.refusal }
      : { agentId: entry.agent.agentId, configuration: read.configuration!, commitId: commit };
    this.#publish(entry, { ...state, checkedAt });
    return undefined;
  }

  /** The agent's file at `commit`: its configuration, or why it was refused; throws the repository's error. */
  async #read(watch: Watch, agent: AgentInfo, commit: string): Promise<FileRead> {
    if (commit === "") return { configuration: EMPTY_AGENT_CONFIGURATION }; // an empty repository
    const path = configurationPath(agent.agentName);
    const tooLarge = `${path} is larger than the ${this.#o.maxFileBytes} bytes allowed`;
    const refused = (message: string): FileRead => {
      this.#o.metrics.invalid.inc();
      this.#o.log.warn(
        { agentId: agent.agentId, commitId: commit, problem: message },
        "agent configuration refused",
      );
      return { refusal: { kind: "invalid", message, commitId: commit, at: new Date().toISOString() } };
    };
    const project = this.#together(watch, commit)
      ? await this.#filesAt(watch, commit, agent.agentId)
      : ({ commit, perAgent: "the watch's only agent" } as const);
    let content: Buffer | undefined;
    if (project.perAgent === undefined) {
      if (project.oversized.has(path)) return refused(tooLarge);
      content = project.files.get(path);
    } else {
      try {
        content = await this.#o.repositories.readFile(watch.location, commit, path, this.#o.maxFileBytes, {
          agentId: agent.agentId,
          signal: this.signal,
        });
      } catch (err) {
        if (err instanceof RepositoryError && err.code === "too_large") return refused(tooLarge);
        throw err;
      }
    }
    if (content === undefined) return { configuration: EMPTY_AGENT_CONFIGURATION };
    let configuration: AgentConfiguration;
    try {
      const text = content.toString("utf8");
      configuration = parseAgentConfiguration(text, { maxBytes: this.#o.maxFileBytes, fileName: path });
    } catch (err) {
      if (!(err instanceof AgentConfigurationError)) throw err;
      return refused(err.message);
    }
    this.#reportUnsupported(agent.agentId, commit, configuration);
    return { configuration };
  }

  /**
   * Whether the agents' files at `commit` are read together: when they are kept already, or the
   * watch has more than one agent. A project with one agent here (the common case) reads its file
   * with one call, not a listing and a batch; agents arriving at a project (a herd) read it
   * together from the second on.
   */
  #together(watch: Watch, commit: string): boolean {
    return watch.files?.commit === commit || watch.agents.size > 1;
  }

  /**
   * The agents' files at `commit` (the watch's): those kept or being read, or a new read charged to
   * `agentId`. A poll that finds another commit drops them, so a read that lost the race with a
   * newer poll's is not kept.
   */
  #filesAt(watch: Watch, commit: string, agentId: string): Promise<ProjectFiles> {
    if (watch.files?.commit === commit) return watch.files.read;
    const read = readProjectFiles(
      this.#o.repositories,
      watch.location,
      commit,
      {
        maxFileBytes: this.#o.maxFileBytes,
        maxTotalBytes: this.#o.maxProjectBytes ?? DEFAULT_MAX_PROJECT_BYTES,
        maxFiles: MAX_BATCH_FILES,
        maxOversized: MAX_OVERSIZED,
      },
      { agentId, signal: this.signal },
    ).then((files) => {
      if (files.perAgent !== undefined) {
        this.#o.log.info(
          { repository: watch.key, commitId: commit, reason: files.perAgent },
          "agent configuration files are read one agent at a time",
        );
      }
      return files;
    });
    const kept = { commit, read };
    watch.files = kept;
    // A failed read is not kept: the next poll (or agent) reads again.
    read.catch(() => {
      if (watch.files === kept) watch.files = undefined;
    });
    return read;
  }

  /** Sections kept but not acted on: logged and counted once per agent and commit, never silent. */
  #reportUnsupported(agentId: string, commit: string, configuration: AgentConfiguration): void {
    const sections = unsupportedSections(configuration);
    if (sections.length === 0 || this.#reported.get(agentId) === commit) return;
    this.#reported.delete(agentId); // re-inserted last: the newest stays longest
    this.#reported.set(agentId, commit);
    if (this.#reported.size > MAX_REPORTED_AGENTS) this.#reported.delete(this.#reported.keys().next().value!);
    for (const section of sections) this.#o.metrics.unsupported.inc({ section });
    this.#o.log.warn(
      { agentId, commitId: commit, sections },
      "agent configuration sets sections this agent does not act on; they are kept and passed on, but ignored",
    );
  }

  /** Counted once per poll; every agent of the watch keeps its configuration and learns why (the loop backs off). */
  #repositoryFailed(watch: Watch, err: unknown): void {
    const first = watch.failing === undefined;
    const message = this.failed(watch, err, first, "cannot read agent configuration project");
    watch.failing = message;
    const problem: ConfigurationProblem = { kind: "repository", message, at: new Date().toISOString() };
    for (const entry of watch.agents.values()) this.#publish(entry, { ...entry.state, problem });
  }

  #publish(entry: AgentEntry, state: AgentConfigurationState): void {
    entry.state = state;
    if (this.#o.onState) this.#deliver(this.#o.onState, state);
    for (const listener of entry.listeners) this.#deliver(listener, state);
  }

  /** A listener that throws is logged; the others still hear. */
  #deliver(listener: Listener, state: AgentConfigurationState): void {
    this.deliver(listener, state, "agent configuration listener failed", { agentId: state.agentId });
  }
}
