// GitLab's namespaces as the agent authorizations read them: groups (nested by full path), projects
// in a group or in a user's personal namespace, and users' memberships with GitLab's access levels.
// Paths compare case-insensitively, as Rails' `where_full_path_in` / `find_by_full_path` do.

/** Gitlab::Access, `sym_options_with_owner` in ascending order. */
export const ACCESS_LEVELS = { guest: 10, reporter: 20, developer: 30, maintainer: 40, owner: 50 } as const;
export type Role = keyof typeof ACCESS_LEVELS;

export interface Group {
  id: number;
  fullPath: string;
  parent?: Group;
}

export interface Project {
  id: number;
  fullPath: string;
  /** Its group; undefined for a project in a user's personal namespace. */
  group?: Group;
}

export interface User {
  id: number;
  username: string;
}

const key = (path: string) => path.toLowerCase();
const parentPath = (path: string) => path.slice(0, Math.max(0, path.lastIndexOf("/")));

export class Namespaces {
  readonly #groups = new Map<string, Group>();
  readonly #projects = new Map<string, Project>();
  readonly #users = new Map<number, User>();
  /** user id -> "group:<id>" | "project:<id>" -> access level (direct memberships). */
  readonly #members = new Map<number, Map<string, number>>();
  #nextGroupId = 100_000;

  /**
   * The group at `fullPath`, its parents created as needed (with ids of their own). Adding it again
   * with the same id (or none) is a no-op; another id is an error.
   */
  addGroup(fullPath: string, id?: number): Group {
    const known = this.#groups.get(key(fullPath));
    if (known !== undefined) {
      if (id !== undefined && known.id !== id)
        throw new Error(`group ${fullPath} is ${known.id} already, not ${id}`);
      return known;
    }
    if (id !== undefined && [...this.#groups.values()].some((g) => g.id === id))
      throw new Error(`group id ${id} is taken`);
    const parent = fullPath.includes("/") ? this.addGroup(parentPath(fullPath)) : undefined;
    const group: Group = { id: id ?? this.#nextGroupId++, fullPath, ...(parent && { parent }) };
    this.#groups.set(key(fullPath), group);
    return group;
  }

  /**
   * The project at `fullPath`. A one-segment namespace that is a known user's username (and no
   * group) is that user's personal namespace; any other namespace is a group (created as needed).
   */
  addProject(id: number, fullPath: string): Project {
    const known = this.#projects.get(key(fullPath)) ?? this.project(id);
    if (known !== undefined) {
      if (known.id !== id || key(known.fullPath) !== key(fullPath))
        throw new Error(`project ${id} ${fullPath} clashes with project ${known.id} ${known.fullPath}`);
      return known;
    }
    const ns = parentPath(fullPath);
    if (ns === "") throw new Error(`project path ${fullPath} has no namespace`);
    const personal =
      !ns.includes("/") &&
      !this.#groups.has(key(ns)) &&
      [...this.#users.values()].some((u) => key(u.username) === key(ns));
    const group = personal ? undefined : this.addGroup(ns);
    const project: Project = { id, fullPath, ...(group && { group }) };
    this.#projects.set(key(fullPath), project);
    return project;
  }

  addUser(user: User): User {
    const known = this.#users.get(user.id);
    if (known !== undefined && known.username !== user.username)
      throw new Error(`user ${user.id} is ${known.username}, not ${user.username}`);
    this.#users.set(user.id, user);
    return user;
  }

  /** A direct membership of `userId` in a project or group. */
  addMember(userId: number, of: { projectId: number } | { groupId: number }, role: Role): void {
    if (!this.#users.has(userId)) throw new Error(`no user ${userId}`);
    const target = "projectId" in of ? `project:${of.projectId}` : `group:${of.groupId}`;
    const m = this.#members.get(userId) ?? new Map<string, number>();
    this.#members.set(userId, m);
    m.set(target, ACCESS_LEVELS[role]);
  }

  project(id: number): Project | undefined {
    return [...this.#projects.values()].find((p) => p.id === id);
  }

  projectByPath(path: string): Project | undefined {
    return this.#projects.get(key(path));
  }

  group(id: number): Group | undefined {
    return [...this.#groups.values()].find((g) => g.id === id);
  }

  groupByPath(path: string): Group | undefined {
    return this.#groups.get(key(path));
  }

  user(id: number): User | undefined {
    return this.#users.get(id);
  }

  /** `group.self_and_ancestors`, the group first. */
  selfAndAncestors(group: Group): Group[] {
    const chain: Group[] = [];
    for (let g: Group | undefined = group; g !== undefined; g = g.parent) chain.push(g);
    return chain;
  }

  /** The first segment of a path: the root ancestor's path. */
  rootPath(path: string): string {
    return key(path.split("/")[0]!);
  }

  /** Whether the root ancestor of `path` is a group (not a user's namespace). */
  rootIsGroup(path: string): boolean {
    return this.#groups.has(this.rootPath(path));
  }

  /** Projects under the root ancestor of `path` (`root_ancestor.all_projects`). */
  projectsUnderRoot(path: string): Project[] {
    const root = this.rootPath(path);
    return [...this.#projects.values()].filter((p) => this.rootPath(p.fullPath) === root);
  }

  /** Groups under the root ancestor of `path`, itself included (`root_ancestor.self_and_descendants`). */
  groupsUnderRoot(path: string): Group[] {
    const root = this.rootPath(path);
    return [...this.#groups.values()].filter((g) => this.rootPath(g.fullPath) === root);
  }

  /** `Gitlab::Access.sym_options_with_owner` up to `level`: guest .. the role of the level. */
  static roles(level: number): Role[] {
    return (Object.keys(ACCESS_LEVELS) as Role[]).filter((r) => ACCESS_LEVELS[r] <= level);
  }

  /**
   * The user's access level in the project as Rails' `project_authorizations` holds it: the highest
   * of a direct membership and memberships in the project's group and its ancestors (shared groups
   * and admins are not modelled). 0 for none.
   */
  projectAccess(userId: number, project: Project): number {
    const m = this.#members.get(userId);
    if (m === undefined) return 0;
    const groups = project.group ? this.selfAndAncestors(project.group) : [];
    return Math.max(
      0,
      m.get(`project:${project.id}`) ?? 0,
      ...groups.map((g) => m.get(`group:${g.id}`) ?? 0),
    );
  }

  /**
   * The user's access level to a group through a direct membership of at least `minimum` in the
   * group or one of its ancestors (UserAccess::GroupAuthorization.for_user); 0 for none.
   */
  groupAccess(userId: number, group: Group, minimum: number): number {
    const m = this.#members.get(userId);
    if (m === undefined) return 0;
    const levels = this.selfAndAncestors(group)
      .map((g) => m.get(`group:${g.id}`) ?? 0)
      .filter((l) => l >= minimum);
    return Math.max(0, ...levels);
  }
}
