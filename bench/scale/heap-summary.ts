// Where retained memory went between two heap snapshots: self size summed by (type, constructor name).
import { readFileSync } from "node:fs";

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

/** Bytes by "type:name" (objects by constructor, closures by function name, strings as one bucket). */
export function selfSizeByName(path: string): Map<string, { bytes: number; count: number }> {
  const snap = JSON.parse(readFileSync(path, "utf8")) as Snapshot;
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const width = fields.length;
  const [iType, iName, iSize] = ["type", "name", "self_size"].map((f) => fields.indexOf(f)) as [
    number,
    number,
    number,
  ];
  const out = new Map<string, { bytes: number; count: number }>();
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + iType]!]!;
    const name =
      type === "string" || type === "concatenated string" || type === "sliced string"
        ? "(strings)"
        : snap.strings[snap.nodes[i + iName]!]!.slice(0, 60);
    const key = `${type}:${name}`;
    const e = out.get(key) ?? { bytes: 0, count: 0 };
    e.bytes += snap.nodes[i + iSize]!;
    e.count++;
    out.set(key, e);
  }
  return out;
}

/** The `top` biggest growths from `before` to `after`, per agent. */
export function growthPerAgent(before: string, after: string, agents: number, top = 20) {
  const a = selfSizeByName(before);
  const b = selfSizeByName(after);
  return [...b]
    .map(([key, e]) => {
      const was = a.get(key) ?? { bytes: 0, count: 0 };
      return {
        key,
        bytesPerAgent: (e.bytes - was.bytes) / agents,
        countPerAgent: (e.count - was.count) / agents,
      };
    })
    .sort((x, y) => y.bytesPerAgent - x.bytesPerAgent)
    .slice(0, top);
}
