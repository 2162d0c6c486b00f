import type { KubeObject } from "./store.ts";

export class SelectorError extends Error {}

type Requirement = (labels: Record<string, string>) => boolean;

/** Splits on commas outside parentheses: `a in (x,y),b` -> [`a in (x,y)`, `b`]. */
function terms(selector: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i];
    if (c === "(") depth++;
    else if (c === ")") depth--;
    else if (c === "," && depth === 0) {
      out.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  out.push(selector.slice(start));
  return out.map((t) => t.trim()).filter((t) => t !== "");
}

const KEY = "[A-Za-z0-9][-A-Za-z0-9_./]*";

/** A label selector as the API takes it: `=`, `==`, `!=`, `in`, `notin`, `key`, `!key`. */
export function parseLabelSelector(selector: string | null): (o: KubeObject) => boolean {
  if (!selector) return () => true;
  const requirements: Requirement[] = terms(selector).map((term) => {
    let m = new RegExp(`^(${KEY})\\s*(==|=|!=)\\s*([-A-Za-z0-9_.]*)$`).exec(term);
    if (m) {
      const [, key, op, value] = m as unknown as [string, string, string, string];
      return op === "!=" ? (l) => l[key] !== value : (l) => l[key] === value;
    }
    m = new RegExp(`^(${KEY})\\s+(in|notin)\\s*\\(([^)]*)\\)$`).exec(term);
    if (m) {
      const [, key, op, list] = m as unknown as [string, string, string, string];
      const values = list.split(",").map((v) => v.trim());
      return op === "in"
        ? (l) => l[key] !== undefined && values.includes(l[key])
        : (l) => l[key] === undefined || !values.includes(l[key]);
    }
    m = new RegExp(`^(!?)(${KEY})$`).exec(term);
    if (m) {
      const [, not, key] = m as unknown as [string, string, string];
      return not ? (l) => !(key in l) : (l) => key in l;
    }
    throw new SelectorError(`unable to parse requirement: ${JSON.stringify(term)}`);
  });
  return (o) => {
    const labels = o.metadata.labels ?? {};
    return requirements.every((r) => r(labels));
  };
}

/**
 * A field selector: `path=value`, `path==value`, `path!=value` over any dotted path of the
 * object (`metadata.name`, `metadata.namespace`, `status.phase`, `spec.nodeName`, ...).
 */
export function parseFieldSelector(selector: string | null): (o: KubeObject) => boolean {
  if (!selector) return () => true;
  const requirements = terms(selector).map((term) => {
    const m = /^([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (!m) throw new SelectorError(`invalid selector: '${term}'; can't understand '${term}'`);
    const [, path, op, value] = m as unknown as [string, string, string, string];
    return (o: KubeObject) => {
      let v: unknown = o;
      for (const part of path.split(".")) v = (v as Record<string, unknown> | undefined)?.[part];
      const actual = v === undefined || v === null ? "" : String(v);
      return op === "!=" ? actual !== value : actual === value;
    };
  });
  return (o) => requirements.every((r) => r(o));
}
