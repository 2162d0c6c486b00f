// Every field of GitLab's kas configuration schema (kascfg.proto, v16.5) is a setting here: mapped,
// implemented, or accepted-not-used. A field missing here would refuse an operator's GitLab file.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { KAS_FIELDS } from "../../../cmd/kas/config/index.ts";

const PROTO = join(import.meta.dirname, "../../fixtures/gitlab-kas/kascfg.proto");

/** The YAML path of every scalar field reachable from ConfigurationFile (json_name is the field name there). */
function gitlabPaths(proto: string): string[] {
  const messages = new Map<string, [type: string, name: string][]>();
  for (const [, name, body] of proto.matchAll(/^message (\w+) \{([\s\S]*?)^\}/gm)) {
    const fields = [...body!.matchAll(/^\s*(?:optional |repeated )?([\w.]+) (\w+) = \d+/gm)];
    messages.set(
      name!,
      fields.map(([, type, field]) => [type!, field!]),
    );
  }
  const paths: string[] = [];
  const walk = (message: string, prefix: string) => {
    for (const [type, name] of messages.get(message) ?? []) {
      const path = prefix ? `${prefix}.${name}` : name;
      if (messages.has(type)) walk(type, path);
      else paths.push(path);
    }
  };
  walk("ConfigurationFile", "");
  return paths;
}

describe("GitLab's kascfg.proto", () => {
  test("every field is a kas setting of the same YAML path", () => {
    const paths = gitlabPaths(readFileSync(PROTO, "utf8"));
    expect(paths.length).toBeGreaterThan(90); // the parse found the schema, not a fragment of it
    const ours = new Set(KAS_FIELDS.map((f) => f.path));
    expect(paths.filter((p) => !ours.has(p))).toEqual([]);
  });
});
