// GitLab's copy of each agent's `ci_access` / `user_access`, kept as Rails keeps it: every
// agent_configuration post refreshes the agent's authorizations (API::Helpers::Kubernetes::
// AgentHelpers#update_configuration: CiAccess::RefreshService, then UserAccess::RefreshService),
// and allowed_agents / authorize_proxy_user answer from them (CiAccess::Finder + FilterService;
// UserAccess::Finder + AuthorizeProxyUserService). The model is GitLab EE with a license: Rails
// drops a ci_access entry's `access_as` and refuses `user_access.access_as.user` without one. Not
// modelled: organization-wide authorizations (`ci_access.instance` with the organization setting),
// administrators (who see every authorization), shared groups.
import { ACCESS_LEVELS, type Group, Namespaces, type Project, type User } from "./namespaces.ts";

export interface Agent {
  id: number;
  name: string;
  /** Its configuration project. */
  project: Project;
}

type Config = Record<string, unknown>;

/** One of allowed_agents' entries before rendering: an agent and the ci_access entry GitLab matched. */
export interface CiAuthorization {
  agent: Agent;
  /** The entry without its `id` (`{}` for the implicit authorization of the agent's own project). */
  config: Config;
}

/** Rails' AUTHORIZED_ENTITY_LIMIT: entries past it in one list are ignored. */
export const AUTHORIZED_ENTITY_LIMIT = 500;

export class AgentAuthorizations {
  readonly #ns: Namespaces;
  readonly #agents = new Map<number, Agent>();
  /** agent id -> project / group id -> the stored config, in the order the entries came. */
  readonly #ciProjects = new Map<number, Map<number, Config>>();
  readonly #ciGroups = new Map<number, Map<number, Config>>();
  readonly #userProjects = new Map<number, Map<number, Config>>();
  readonly #userGroups = new Map<number, Map<number, Config>>();

  constructor(namespaces: Namespaces) {
    this.#ns = namespaces;
  }

  addAgent(agent: Agent): void {
    const known = this.#agents.get(agent.id);
    if (known !== undefined && known.project.id !== agent.project.id)
      throw new Error(`agent ${agent.id} has configuration project ${known.project.id} already`);
    this.#agents.set(agent.id, agent);
  }

  agent(id: number): Agent | undefined {
    return this.#agents.get(id);
  }

  /**
   * What Rails does with a posted `agent_config`: the entries of `ci_access.projects` / `groups` and
   * `user_access.projects` / `groups` (the first AUTHORIZED_ENTITY_LIMIT of each) are looked up by
   * full path among the projects and groups under the root ancestor of the agent's configuration
   * project (groups only when that root is a group); paths it cannot find there are ignored. Each
   * list replaces the agent's previous authorizations of its kind, so an entry a commit removes
   * loses its access. A ci_access authorization stores its entry without `id`; a user_access one
   * stores `{access_as}` of user_access (the same for all of them).
   */
  updateConfiguration(agentId: number, agentConfig: Config): void {
    const agent = this.#agents.get(agentId);
    if (agent === undefined) throw new Error(`no agent ${agentId}`);
    const config = structuredClone(agentConfig);
    const root = agent.project.fullPath;
    const projects = this.#ns.projectsUnderRoot(root);
    const groups = this.#ns.rootIsGroup(root) ? this.#ns.groupsUnderRoot(root) : [];
    const refresh = <T extends Project | Group>(
      section: string,
      entity: "projects" | "groups",
      candidates: T[],
      stored: (entry: Config) => Config,
    ): Map<number, Config> => {
      const entries = entriesOf(config, section, entity);
      const kept = new Map<number, Config>();
      for (const [path, entry] of entries) {
        const found = candidates.find((c) => c.fullPath.toLowerCase() === path);
        if (found !== undefined) kept.set(found.id, stored(entry));
      }
      return kept;
    };
    const userAccess = asObject(config.user_access);
    const userAccessAs = userAccess?.access_as === undefined ? {} : { access_as: userAccess.access_as };
    this.#ciProjects.set(
      agentId,
      refresh("ci_access", "projects", projects, (e) => e),
    );
    this.#ciGroups.set(
      agentId,
      refresh("ci_access", "groups", groups, (e) => e),
    );
    this.#userProjects.set(
      agentId,
      refresh("user_access", "projects", projects, () => userAccessAs),
    );
    this.#userGroups.set(
      agentId,
      refresh("user_access", "groups", groups, () => userAccessAs),
    );
  }

  /**
   * The agents a CI job of `project` may use (CiAccess::Finder): authorizations of the project
   * itself, then the implicit one of each agent whose configuration project it is, then the
   * closest of the project's group and its ancestors; one per agent, the first found. An agent's
   * project or group authorization counts only while the agent's configuration project is under
   * the job project's root group (for a personal project: in the same namespace).
   */
  ciAccessFor(project: Project): CiAuthorization[] {
    const agents = [...this.#agents.values()];
    const sameHierarchy = (agent: Agent) =>
      project.group
        ? agent.project.group !== undefined &&
          this.#ns.rootPath(agent.project.fullPath) === this.#ns.rootPath(project.fullPath)
        : agent.project.group === undefined &&
          this.#ns.rootPath(agent.project.fullPath) === this.#ns.rootPath(project.fullPath);
    const viaProject = agents.flatMap((agent) => {
      const config = this.#ciProjects.get(agent.id)?.get(project.id);
      return config !== undefined && sameHierarchy(agent) ? [{ agent, config }] : [];
    });
    const implicit = agents
      .filter((a) => a.project.id === project.id)
      .map((agent) => ({ agent, config: {} }));
    const ancestors = project.group ? this.#ns.selfAndAncestors(project.group) : [];
    const viaGroup = agents
      .filter(sameHierarchy)
      .sort((a, b) => a.id - b.id)
      .flatMap((agent) => {
        const stored = this.#ciGroups.get(agent.id);
        const closest = ancestors.find((g) => stored?.has(g.id));
        return closest === undefined ? [] : [{ agent, config: stored!.get(closest.id)! }];
      });
    const seen = new Set<number>();
    return [...viaProject, ...implicit, ...viaGroup].filter(
      (a) => !seen.has(a.agent.id) && seen.add(a.agent.id),
    );
  }

  /**
   * CiAccess::FilterService as allowed_agents calls it: an entry with `environments` is kept only
   * when the job's environment name matches one of them (Gitlab::Ci::EnvironmentMatcher: equal, or
   * with `*` a regular expression where `*` is `.*`, unanchored as Rails'); an entry with
   * `protected_branches_only` only when the pipeline's ref is protected.
   */
  filterCi(
    authorizations: CiAuthorization[],
    job: { environment?: string; protectedRef: boolean },
  ): CiAuthorization[] {
    const matches = (pattern: unknown, env: string | undefined) =>
      typeof pattern === "string" &&
      pattern !== "" &&
      env !== undefined &&
      (pattern === env || (pattern.includes("*") && new RegExp(pattern.replaceAll("*", ".*")).test(env)));
    return authorizations.filter((a) => {
      const environments = a.config.environments;
      if (Array.isArray(environments) && environments.length > 0) {
        if (!environments.some((p) => matches(p, job.environment))) return false;
      }
      return job.protectedRef || !a.config.protected_branches_only;
    });
  }

  /**
   * authorize_proxy_user for a known user and agent (AuthorizeProxyUserService, EE's included):
   * the user's user_access authorizations of the agent (UserAccess::Finder: a project where the
   * user's access is at least Developer; a group where the user is a direct member, at least
   * Developer, of it or an ancestor), answered as `access_as` of user_access says. A 403 carries
   * Rails' message.
   */
  authorizeProxyUser(user: User, agent: Agent): [number, unknown] {
    const developer = ACCESS_LEVELS.developer;
    const projects = [...(this.#userProjects.get(agent.id) ?? [])].flatMap(([id]) => {
      const project = this.#ns.project(id);
      const level = project ? this.#ns.projectAccess(user.id, project) : 0;
      return level >= developer ? [{ id, level }] : [];
    });
    const groups = [...(this.#userGroups.get(agent.id) ?? [])].flatMap(([id]) => {
      const group = this.#ns.group(id);
      const level = group ? this.#ns.groupAccess(user.id, group, developer) : 0;
      return level > 0 ? [{ id, level }] : [];
    });
    // Agent#user_access_config: the config of any of its authorizations (they are all the same).
    const stored = [
      ...(this.#userProjects.get(agent.id)?.values() ?? []),
      ...(this.#userGroups.get(agent.id)?.values() ?? []),
    ];
    const accessAs = asObject(stored[0]?.access_as);
    const forbidden = (message: string): [number, unknown] => [403, { message }];
    if (stored.length === 0 || stored[0] === undefined || Object.keys(stored[0]).length === 0)
      return forbidden("`user_access` keyword is not found in agent config file.");
    if (accessAs === undefined || Object.keys(accessAs).length === 0)
      return forbidden("`access_as` is not found under the `user_access` keyword.");
    if (Object.keys(accessAs).length !== 1)
      return forbidden("`access_as` must exist only once under the `user_access` keyword.");
    // For another key (ci_job, impersonate, ...) Rails' service returns no response (a 500); a 403 here.
    if (accessAs.agent === undefined && accessAs.user === undefined)
      return forbidden("`access_as` under `user_access` must be `agent` or `user`.");
    if (projects.length + groups.length === 0)
      return forbidden("You must be a member of `projects` or `groups` under the `user_access` keyword.");
    return [
      200,
      {
        agent: { id: agent.id, config_project: { id: agent.project.id } },
        user: { id: user.id, username: user.username },
        access_as:
          accessAs.agent !== undefined
            ? { agent: {} }
            : {
                user: {
                  projects: projects.map((p) => ({ id: p.id, roles: Namespaces.roles(p.level) })),
                  groups: groups.map((g) => ({ id: g.id, roles: Namespaces.roles(g.level) })),
                },
              },
      },
    ];
  }
}

function asObject(value: unknown): Config | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Config) : undefined;
}

/**
 * `config.dig(section, entity).first(LIMIT).index_by { |c| c.delete('id').downcase }`: lowercased
 * path -> the entry without `id`; a later entry for the same path wins, as index_by's.
 */
function entriesOf(config: Config, section: string, entity: string): Map<string, Config> {
  const list = asObject(config[section])?.[entity];
  const entries = new Map<string, Config>();
  if (!Array.isArray(list)) return entries;
  for (const item of list.slice(0, AUTHORIZED_ENTITY_LIMIT)) {
    const entry = asObject(item);
    if (entry === undefined || typeof entry.id !== "string") continue;
    const { id, ...rest } = entry;
    entries.set(id.toLowerCase(), rest);
  }
  return entries;
}
