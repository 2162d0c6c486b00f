export { ConfigError, type ConfigIssue, formatIssue } from "../../../tool/config/errors.ts";
export * from "../../../tool/config/values.ts";
export { type KasArgs, kasHelp, parseKasArgs } from "./cli.ts";
export { buildKasConfig, type LoadKasConfigOptions, loadKasConfig, parseYaml } from "./load.ts";
export { notUsedWarnings } from "./not-used.ts";
export {
  envNameOf,
  KAS_FIELDS,
  type KasConfig,
  kasConfigSchema,
  type ListenConfig,
  type TlsFiles,
} from "./schema.ts";
export { decodeSecret, type KasSecrets, readKasSecrets, SECRET_BYTES } from "./secrets.ts";
