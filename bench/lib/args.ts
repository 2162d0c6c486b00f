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
  const argv = process.argv.slice(2);
  if (argv.includes("--help") || argv.includes("-h")) {
    const lines = Object.entries({ json: false, ...defaults }).map(([name, value]) =>
      typeof value === "boolean" ? `  --${name}` : `  --${name} <value>  (default ${value})`,
    );
    process.stdout.write(
      `options (see BENCHMARKS.md for what each benchmark measures):\n${lines.join("\n")}\n`,
    );
    process.exit(0);
  }
  let args: Values<D>;
  try {
    args = parseArgs({ args: argv, options }).values as Values<D>;
  } catch (err) {
    process.stderr.write(`${(err as Error).message}; --help lists the options\n`);
    process.exit(2);
  }
  const log = (line: string) => {
    if (!args.json) process.stderr.write(`${line}\n`);
  };
  return { args, log };
}

/** An environment given as "NAME=value,NAME=value" (an option such as --kas-env); values may hold "=". */
export function envList(list: string): Record<string, string> {
  return Object.fromEntries(
    list
      .split(",")
      .filter(Boolean)
      .map((kv) => {
        const at = kv.indexOf("=");
        if (at <= 0) throw new Error(`expected NAME=value, got ${JSON.stringify(kv)}`);
        return [kv.slice(0, at), kv.slice(at + 1)];
      }),
  );
}
