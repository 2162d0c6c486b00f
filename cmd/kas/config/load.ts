import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import { parseDocument } from "yaml";
import { ConfigError } from "../../../tool/config/errors.ts";
import { loadSettings } from "../../../tool/config/load-settings.ts";
import { envNameOf, type KasConfig, kasConfigSchema } from "./schema.ts";

export interface LoadKasConfigOptions {
  /** YAML (or JSON) file; without it, defaults and the environment only. */
  configFile?: string;
  /** Default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/** Reads the file, applies `KAS_*` environment overrides over it and defaults under it, validates. */
export async function loadKasConfig(options: LoadKasConfigOptions = {}): Promise<KasConfig> {
  let document: unknown = {};
  if (options.configFile !== undefined) {
    let text: string;
    try {
      text = await readFile(options.configFile, "utf8");
    } catch (err) {
      const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      throw new ConfigError([{ field: "--config", message: `cannot read ${options.configFile}: ${reason}` }]);
    }
    document = parseYaml(text, options.configFile);
  }
  return buildKasConfig(document, options.env ?? process.env, options.configFile);
}

export function parseYaml(text: string, fileName: string): unknown {
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      doc.errors.map((e) => ({ field: "--config", message: `${fileName} is not valid YAML: ${e.message}` })),
    );
  }
  return doc.toJS() ?? {};
}

/** The pure part of loading: a parsed document plus an environment in, a validated config out. */
export function buildKasConfig(
  document: unknown,
  env: NodeJS.ProcessEnv,
  fileName = "config file",
): KasConfig {
  return loadSettings(kasConfigSchema, { document, env, envName: envNameOf, fileSource: basename(fileName) });
}
