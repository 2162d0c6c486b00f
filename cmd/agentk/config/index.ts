export { AGENTK_FLAGS, agentkHelp } from "./flags.ts";
export { parseKasHeaders } from "./headers.ts";
export { type KubeConfigSource, resolveKubeConfig, SERVICE_ACCOUNT_DIR } from "./kubernetes.ts";
export {
  type AgentkArgs,
  type AgentkConfig,
  type LoadAgentkConfigOptions,
  loadAgentkConfig,
} from "./load.ts";
export { type AllowedService, parseServiceSpec, readServicesFile } from "./services.ts";
