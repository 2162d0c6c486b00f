// Every benchmark's command line: `--json` (one JSON document on stdout, no progress on stderr)
// and its own options, each given with its default (a string: `--name value`; a boolean: a flag).
import { parseArgs } from "node:util";

type Values<D> = { json: boolean } & { [K in keyof D]: D[K] extends boolean ? boolean : string };

/** The options' values, and `log`: progress on stderr unless --json. */
export function benchArgs<const D extends Record<string, string | boolean>>(
  defaults: D,
): { args: Values<D>; log: (line: string) => void } {
  const options = Object.fromEntries(
    Object.entries({ json: false, ...defaults }).map(([name, value]) => [
      name,
      typeof value === "boolean"
        ? { type: "boolean" as const, default: value }
        : { type: "string" as const, default: value },
    ]),
  );
  const args = parseArgs({ options }).values as Values<D>;
  const log = (line: string) => {
    if (!args.json) process.stderr.write(`${line}\n`);
  };
  return { args, log };
}
