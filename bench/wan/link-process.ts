// The modelled links (bench/lib/link.ts) in a process of their own, so that their timers do not
// wait behind the work of either end. Commands arrive as JSON lines on stdin, each answered by one
// JSON line on stdout, in order; the process exits when stdin ends.
import { createInterface } from "node:readline";
import { createLink, type Link, type LinkOptions } from "../lib/link.ts";

export type LinkCommand =
  | { op: "link"; name: string; options: LinkOptions }
  | { op: "forward"; name: string; port: number }
  | { op: "stats"; name: string };

const links = new Map<string, Link>();

async function handle(cmd: LinkCommand): Promise<unknown> {
  if (cmd.op === "link") {
    if (links.has(cmd.name)) throw new Error(`link ${cmd.name} exists`);
    const link = createLink(cmd.options);
    links.set(cmd.name, link);
    return link.options;
  }
  const link = links.get(cmd.name);
  if (!link) throw new Error(`no link ${cmd.name}`);
  if (cmd.op === "forward") return { port: await link.forward(cmd.port) };
  return link.stats;
}

for await (const line of createInterface({ input: process.stdin })) {
  try {
    process.stdout.write(`${JSON.stringify({ ok: await handle(JSON.parse(line) as LinkCommand) })}\n`);
  } catch (err) {
    process.stdout.write(`${JSON.stringify({ error: String(err) })}\n`);
  }
}
await Promise.all([...links.values()].map((l) => l.close()));
process.exit(0);
