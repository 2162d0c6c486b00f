// GitLab's kas settings this kas accepts but does not act on (SettingMeta.notUsed): which of them a
// configuration sets, as the warnings kas logs once at start. An operator moving from GitLab's kas
// keeps a file that loads, and learns which of its settings change nothing here.
import type { SettingLeaf } from "../../../tool/config/settings.ts";
import { KAS_FIELDS, type KasConfig } from "./schema.ts";

/** One warning per reason: the settings set that share it, named by their section when it is wholly GitLab's. */
export function notUsedWarnings(config: KasConfig, fields: readonly SettingLeaf[] = KAS_FIELDS): string[] {
  const groups = new Map<string, SettingLeaf[]>();
  for (const leaf of fields) {
    const reason = leaf.meta.notUsed;
    if (reason === undefined || valueAt(config, leaf.keys) === undefined) continue;
    const key = `${parentOf(leaf.path)}\n${reason}`;
    groups.set(key, [...(groups.get(key) ?? []), leaf]);
  }
  return [...groups.entries()].map(([key, leaves]) => {
    const [parent, reason] = key.split("\n") as [string, string];
    const siblings = fields.filter((f) => parentOf(f.path) === parent);
    const wholeSection = leaves.length > 1 && siblings.every((f) => f.meta.notUsed === reason);
    const names = wholeSection ? [parent] : leaves.map((l) => l.path);
    const verb = names.length === 1 ? "is GitLab's setting" : "are GitLab's settings";
    return `${names.join(", ")} ${verb}; ${reason}`;
  });
}

function parentOf(path: string): string {
  return path.split(".").slice(0, -1).join(".");
}

function valueAt(config: unknown, keys: readonly string[]): unknown {
  return keys.reduce<unknown>((node, k) => (node as Record<string, unknown> | undefined)?.[k], config);
}
