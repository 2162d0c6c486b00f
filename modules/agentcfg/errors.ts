// The one error a bad configuration file produces, whatever went wrong.

export interface AgentConfigurationIssue {
  /** YAML path of the offending field, e.g. `gitops.manifest_projects[0].paths[1].glob`; "" for the whole file. */
  path: string;
  message: string;
  /** 1-based position in the file, where the field (or its nearest present parent) exists. */
  line?: number;
  column?: number;
}

/** A hostile file can produce thousands of errors; the first few say enough. */
export const MAX_REPORTED_ISSUES = 20;

export class AgentConfigurationError extends Error {
  override readonly name = "AgentConfigurationError";
  readonly issues: readonly AgentConfigurationIssue[];

  constructor(issues: AgentConfigurationIssue[], fileName?: string) {
    if (issues.length > MAX_REPORTED_ISSUES) {
      const more = issues.length - MAX_REPORTED_ISSUES;
      issues = [...issues.slice(0, MAX_REPORTED_ISSUES), { path: "", message: `and ${more} more problems` }];
    }
    super(
      `${fileName ?? "agent configuration"}: invalid:\n${issues.map((i) => `  ${formatIssue(i)}`).join("\n")}`,
    );
    this.issues = issues;
  }
}

function formatIssue(i: AgentConfigurationIssue): string {
  const where = i.line === undefined ? "" : `${i.line}:${i.column ?? 1}: `;
  return `${where}${i.path === "" ? "" : `${i.path}: `}${i.message}`;
}

const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_-]*$/;

/** `["a", 0, "b"]` -> `a[0].b`; a key that is not a plain name is quoted: `a["x.y"]`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const seg of path) {
    if (typeof seg === "number") out += `[${seg}]`;
    else if (PLAIN_KEY.test(String(seg))) out += out === "" ? String(seg) : `.${String(seg)}`;
    else out += `[${JSON.stringify(String(seg))}]`;
  }
  return out;
}
