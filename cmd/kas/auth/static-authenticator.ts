import { readFile } from "node:fs/promises";
import { isAbsolute } from "node:path";
import { parse as parseYaml } from "yaml";
import { tokenDigest } from "../../../tool/agent-token.ts";
import { AgentAuthError } from "./errors.ts";
import type { AgentAuthenticator, AgentInfo } from "./types.ts";

export interface StaticAgent {
  agentId: string;
  projectId: string;
  agentName: string;
  /** The agent's configuration project as a git repository on kas's disk (no Gitaly needed). */
  localRepository?: string;
  /** The manifest projects (GitOps) the agent may read: full path -> git repository on kas's disk. */
  localManifestProjects?: Readonly<Record<string, string>>;
}

/**
 * A fixed token -> agent table, for development, the demo and benchmarks: no GitLab needed. Tokens
 * are held only as SHA-256 digests, and a presented token is looked up by its digest, as GitLab
 * finds an agent token by its digest in an index. The lookup's timing can tell only how a stored
 * digest compares with the digest of what was presented, which is no help in guessing a token
 * (SHA-256 has no known preimages); one lookup, not a comparison with every entry, keeps a
 * handshake's cost the same with 10 agents or 10,000 (with 1,000 tokens the scan was 6 % of kas's
 * CPU while agents arrived).
 */
export class StaticTokenAuthenticator implements AgentAuthenticator {
  /** base64 of the token's SHA-256 -> its agent. */
  readonly #agents = new Map<string, StaticAgent>();

  constructor(tokens: ReadonlyMap<string, StaticAgent> | Readonly<Record<string, StaticAgent>>) {
    const pairs = tokens instanceof Map ? [...tokens] : Object.entries(tokens);
    for (const [token, agent] of pairs) this.#agents.set(digestKey(token), { ...agent });
  }

  get size(): number {
    return this.#agents.size;
  }

  async authenticateAgent(token: string): Promise<AgentInfo> {
    const found = this.#agents.get(digestKey(token));
    if (found === undefined) throw new AgentAuthError("unauthenticated", "agent token is invalid or revoked");
    const { localManifestProjects, ...agent } = found;
    return {
      ...agent,
      ...(localManifestProjects && { localManifestProjects: { ...localManifestProjects } }),
    };
  }
}

function digestKey(token: string): string {
  return tokenDigest(token).toString("base64");
}

/**
 * Reads a YAML or JSON file mapping each token to `{agentId, projectId, agentName, repository?,
 * manifest_projects?}` (`manifest_projects`: full project path -> absolute path of its git
 * repository). Errors never show a token.
 */
export async function loadStaticTokens(path: string): Promise<StaticTokenAuthenticator> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    throw new Error(`static tokens file ${path}: cannot read: ${(err as NodeJS.ErrnoException).code ?? err}`);
  }
  return new StaticTokenAuthenticator(parseStaticTokens(text, path));
}

/**
 * The agent's token in the static tokens file, if it has one (the first listed): what a kubeconfig
 * for the agent carries by default (`kas kubeconfig`, GitLab's API). Read when asked, never kept.
 */
export async function staticTokenFor(path: string, agentId: string): Promise<string | undefined> {
  for (const [token, agent] of parseStaticTokens(await readFile(path, "utf8"), path))
    if (agent.agentId === agentId) return token;
  return undefined;
}

export function parseStaticTokens(text: string, path = "static tokens file"): Map<string, StaticAgent> {
  let doc: unknown;
  try {
    doc = parseYaml(text, { prettyErrors: false });
  } catch (err) {
    // The parser's messages may quote the source, and the source is tokens: only where it failed.
    const offset = (err as { pos?: [number, number] }).pos?.[0];
    const before = offset === undefined ? undefined : text.slice(0, offset).split("\n");
    const where = before ? ` at line ${before.length}, column ${before.at(-1)!.length + 1}` : "";
    throw new Error(`${path}: not valid YAML or JSON${where}`);
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) {
    throw new Error(`${path}: expected a mapping of token -> {agentId, projectId, agentName}`);
  }
  const tokens = new Map<string, StaticAgent>();
  Object.entries(doc).forEach(([token, value], i) => {
    const where = `${path}: entry #${i + 1}`; // never the token itself
    if (token.trim() === "" || /\s/.test(token))
      throw new Error(`${where}: the token must be non-empty without spaces`);
    if (typeof value !== "object" || value === null)
      throw new Error(`${where}: expected {agentId, projectId, agentName}`);
    const v = value as Record<string, unknown>;
    const id = (key: string) => {
      const x = v[key];
      if (
        (typeof x === "number" && Number.isSafeInteger(x) && x > 0) ||
        (typeof x === "string" && /^[1-9]\d*$/.test(x))
      ) {
        return String(x);
      }
      throw new Error(`${where}: ${key}: expected a positive integer id`);
    };
    if (typeof v.agentName !== "string" || v.agentName === "")
      throw new Error(`${where}: agentName: expected a non-empty string`);
    if (v.repository !== undefined && (typeof v.repository !== "string" || !isAbsolute(v.repository)))
      throw new Error(`${where}: repository: expected the absolute path of a git repository`);
    const manifests = manifestProjects(where, v.manifest_projects);
    tokens.set(token, {
      agentId: id("agentId"),
      projectId: id("projectId"),
      agentName: v.agentName,
      ...(typeof v.repository === "string" && { localRepository: v.repository }),
      ...(manifests && { localManifestProjects: manifests }),
    });
  });
  return tokens;
}

/** `manifest_projects: {"group/project": "/abs/path/to/repo"}` of one entry; `where` names the entry, never its token. */
function manifestProjects(where: string, value: unknown): Record<string, string> | undefined {
  if (value === undefined || value === null) return undefined;
  const field = `${where}: manifest_projects`;
  if (typeof value !== "object" || Array.isArray(value)) {
    throw new Error(
      `${field}: expected a mapping of project full path -> absolute path of its git repository`,
    );
  }
  const out: Record<string, string> = Object.create(null);
  for (const [project, path] of Object.entries(value)) {
    if (
      project === "" ||
      /^\d+$/.test(project) ||
      project.startsWith("/") ||
      project.endsWith("/") ||
      project.includes("//") ||
      /\s/.test(project)
    ) {
      throw new Error(
        `${field}: ${JSON.stringify(project)}: expected a project's full path, e.g. "group/project"`,
      );
    }
    if (typeof path !== "string" || !isAbsolute(path)) {
      throw new Error(`${field}.${project}: expected the absolute path of a git repository`);
    }
    out[project] = path;
  }
  return out;
}
