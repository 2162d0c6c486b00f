// The one command-line parser of the daemons and their subcommands: flags only (no positional
// arguments), an unknown flag or a missing value is a ConfigError that sends the operator to --help.
import { type ParseArgsConfig, parseArgs } from "node:util";
import { ConfigError } from "./errors.ts";

export type ArgvOptions = NonNullable<ParseArgsConfig["options"]>;

type Parsed<O extends ArgvOptions> = ReturnType<
  typeof parseArgs<{ args: string[]; options: O; strict: true; allowPositionals: false }>
>["values"];

export interface ArgvUsage {
  /** The command as typed, for "see <command> --help": "kas", "kas kubeconfig". */
  command: string;
  /** The field; default "arguments". */
  field?: string;
}

/** `argv`'s flags as `options` describe them; throws a ConfigError naming `usage.field`. */
export function parseArgv<const O extends ArgvOptions>(
  argv: readonly string[],
  options: O,
  usage: ArgvUsage,
): Parsed<O> {
  try {
    return parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }).values;
  } catch (err) {
    throw new ConfigError([
      {
        field: usage.field ?? "arguments",
        message: `${(err as Error).message}; see ${usage.command} --help`,
      },
    ]);
  }
}
