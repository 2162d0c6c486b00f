/** One problem with one setting. `field` is the YAML path (or a flag such as "--config"). */
export interface ConfigIssue {
  field: string;
  message: string;
  /** Where the bad value came from, e.g. "KAS_AGENT_LISTEN_ADDRESS" or "kas.yaml". */
  source?: string;
}

/** The configuration cannot be used; `message` lists every issue, one per line, each naming its field. */
export class ConfigError extends Error {
  override name = "ConfigError";
  readonly issues: readonly ConfigIssue[];

  constructor(issues: readonly ConfigIssue[]) {
    super(issues.map(formatIssue).join("\n"));
    this.issues = issues;
  }
}

export function formatIssue(issue: ConfigIssue): string {
  return `${issue.field}: ${issue.message}${issue.source ? ` (from ${issue.source})` : ""}`;
}
