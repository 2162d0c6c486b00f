// config.yaml text -> a validated AgentConfiguration, or one AgentConfigurationError listing
// every problem with its YAML path and position. Read as GitLab's kas reads it: YAML -> JSON as
// sigs.k8s.io/yaml does (go-yaml.ts), then protojson field by field (flavour.ts). Stricter than
// GitLab on the YAML only: duplicate keys and several documents are refused (go-yaml v2 keeps
// the last key and the first document silently).
import { LineCounter, parseDocument } from "yaml";
import { type AgentConfiguration, agentConfigurationSchema } from "./configuration.ts";
import { AgentConfigurationError, type AgentConfigurationIssue, formatPath } from "./errors.ts";
import { GO_YAML_OPTIONS } from "./go-yaml.ts";
import { fromZodIssues, pathAt } from "./issues.ts";

/** GitLab's own limit for an agent's config.yaml is of this order; kas reads it whole into memory. */
export const DEFAULT_MAX_CONFIG_BYTES = 128 * 1024;
/** Alias expansions allowed while building the value: enough for any real file, not for a "billion laughs". */
export const MAX_ALIAS_COUNT = 100;

export interface ParseOptions {
  /** Files larger than this are refused before parsing. Default 128 KiB. */
  maxBytes?: number;
  /** Named in the error message, e.g. `.gitlab/agents/my-agent/config.yaml`. */
  fileName?: string;
}

export function parseAgentConfiguration(text: string, options: ParseOptions = {}): AgentConfiguration {
  const { maxBytes = DEFAULT_MAX_CONFIG_BYTES, fileName } = options;
  const fail = (issues: AgentConfigurationIssue[]): never => {
    throw new AgentConfigurationError(issues, fileName);
  };
  const size = Buffer.byteLength(text, "utf8");
  if (size > maxBytes)
    fail([{ path: "", message: `file is ${size} bytes, over the limit of ${maxBytes} bytes` }]);

  try {
    const lineCounter = new LineCounter();
    const doc = parseDocument(text, {
      lineCounter,
      prettyErrors: true,
      uniqueKeys: true,
      ...GO_YAML_OPTIONS,
    });
    if (doc.errors.length > 0) {
      fail(
        doc.errors.map((e) => {
          const pos = e.linePos?.[0];
          return {
            path: formatPath(pathAt(doc, e.pos[0])),
            message: firstLine(e.message),
            ...(pos ? { line: pos.line, column: pos.col } : {}),
          };
        }),
      );
    }
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
    } catch (e) {
      // yaml throws a ReferenceError when aliases expand past maxAliasCount; anything else (a
      // merge key `<<` whose source is not a map) is not about aliases: the catch below says it.
      if (!(e instanceof ReferenceError)) throw e;
      fail([{ path: "", message: `YAML aliases expand too much: ${errorMessage(e)}` }]);
    }
    // Empty, comments only, or `null`: nothing configured.
    const result = agentConfigurationSchema.safeParse(nullsUnset(value ?? {}));
    if (!result.success) fail(fromZodIssues(result.error.issues, { doc, lineCounter }));
    return result.data!;
  } catch (e) {
    if (e instanceof AgentConfigurationError) throw e;
    // Whatever else a hostile file provokes (e.g. nesting deep enough to exhaust the stack)
    // is still a refused configuration, never a crash of kas.
    return fail([{ path: "", message: `cannot read the file: ${errorMessage(e)}` }]);
  }
}

/**
 * protojson reads a field set to null as a field not set: its default applies, whatever its type.
 * The key stays (an unknown one is still refused) with no value. A null in a list is refused.
 */
function nullsUnset(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(nullsUnset);
  if (typeof value !== "object" || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = v === null ? undefined : nullsUnset(v);
  return out;
}

function firstLine(message: string): string {
  // yaml's pretty messages continue with " at line L, column C:" and a source excerpt.
  return message.split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "");
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
