export { AGENTK_KEEPALIVE_DEFAULT, type AgentkFlags, agentkFlags, agentkHelp } from "./flags.ts";
export { parseKasHeaders } from "./headers.ts";
export {
  type AgentkArgs,
  type AgentkConfig,
  type LoadAgentkConfigOptions,
  loadAgentkConfig,
} from "./load.ts";
