export {
  TunnelAdmission,
  type TunnelAdmissionOptions,
  type TunnelLimitReason,
  type TunnelLimits,
} from "./admission.ts";
export { tokenKeyer } from "./token-key.ts";
