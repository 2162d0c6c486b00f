import { AgentAuthError } from "./errors.ts";
import type { AgentInfo, GitalyInfo, GitalyRepository } from "./types.ts";

/**
 * Checks the JSON body of GitLab's `GET /api/v4/internal/kubernetes/agent_info` and turns it into
 * an {@link AgentInfo}. The wire names are GitLab's: project_id, agent_id, agent_name,
 * gitaly_info {address, token, features}, gitaly_repository {storage_name, relative_path,
 * gl_repository, gl_project_path, ...}, default_branch. A body of another shape is an
 * `unavailable` error that says which field is wrong (GitLab and kas versions disagree).
 */
export function parseAgentInfoResponse(body: unknown): AgentInfo {
  const r = new Reader("agent_info response");
  const root = r.object(body, "");
  const info: AgentInfo = {
    projectId: r.id(root, "project_id"),
    agentId: r.id(root, "agent_id"),
    agentName: r.string(root, "agent_name"),
    gitalyInfo: parseGitalyInfo(r, r.object(root.gitaly_info, "gitaly_info")),
    gitalyRepository: parseGitalyRepository(r, r.object(root.gitaly_repository, "gitaly_repository")),
  };
  const branch = r.optionalString(root, "default_branch");
  if (branch !== undefined) info.defaultBranch = branch;
  return info;
}

export function parseGitalyInfo(r: Reader, o: Record<string, unknown>): GitalyInfo {
  const info: GitalyInfo = { address: r.string(o, "address", "gitaly_info."), features: {} };
  const token = r.optionalString(o, "token", "gitaly_info.", true);
  if (token !== undefined) info.token = token;
  if (o.features !== undefined && o.features !== null) {
    const features = r.object(o.features, "gitaly_info.features");
    for (const key of Object.keys(features)) {
      info.features[key] = r.string(features, key, "gitaly_info.features.", true);
    }
  }
  return info;
}

export function parseGitalyRepository(r: Reader, o: Record<string, unknown>): GitalyRepository {
  const p = "gitaly_repository.";
  const repo: GitalyRepository = {
    storageName: r.string(o, "storage_name", p),
    relativePath: r.string(o, "relative_path", p),
    glRepository: r.string(o, "gl_repository", p),
    glProjectPath: r.string(o, "gl_project_path", p),
  };
  const objectDir = r.optionalString(o, "git_object_directory", p, true);
  if (objectDir) repo.gitObjectDirectory = objectDir;
  const alternates = o.git_alternate_object_directories;
  if (alternates !== undefined && alternates !== null) {
    if (!Array.isArray(alternates) || !alternates.every((a) => typeof a === "string")) {
      throw r.fail(`${p}git_alternate_object_directories`, "expected an array of strings");
    }
    if (alternates.length > 0) repo.gitAlternateObjectDirectories = alternates;
  }
  return repo;
}

/** Field accessors that fail with the field's name. */
export class Reader {
  constructor(readonly what: string) {}

  fail(field: string, message: string): AgentAuthError {
    return new AgentAuthError(
      "unavailable",
      `GitLab returned an unexpected ${this.what}: ${field}: ${message}`,
    );
  }

  object(v: unknown, field: string): Record<string, unknown> {
    if (typeof v !== "object" || v === null || Array.isArray(v)) {
      throw this.fail(field || "(body)", `expected an object, got ${kind(v)}`);
    }
    return v as Record<string, unknown>;
  }

  string(o: Record<string, unknown>, key: string, prefix = "", allowEmpty = false): string {
    const v = o[key];
    if (typeof v !== "string") throw this.fail(prefix + key, `expected a string, got ${kind(v)}`);
    if (!allowEmpty && v === "") throw this.fail(prefix + key, "must not be empty");
    return v;
  }

  optionalString(
    o: Record<string, unknown>,
    key: string,
    prefix = "",
    allowEmpty = false,
  ): string | undefined {
    return o[key] === undefined || o[key] === null ? undefined : this.string(o, key, prefix, allowEmpty);
  }

  /** GitLab ids are positive integers; JSON numbers (or digit strings, for ids beyond 2^53). */
  id(o: Record<string, unknown>, key: string): string {
    const v = o[key];
    if (typeof v === "number" && Number.isSafeInteger(v) && v > 0) return String(v);
    if (typeof v === "string" && /^[1-9]\d*$/.test(v)) return v;
    throw this.fail(key, `expected a positive integer id, got ${kind(v)}`);
  }
}

function kind(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "number") return `the number ${v}`;
  return typeof v;
}
