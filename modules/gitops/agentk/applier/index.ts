// The GitOps applier (no gRPC): one manifest project's files -> the cluster.
export {
  Applier,
  type ApplierEvent,
  type ApplierOptions,
  type ApplyRequest,
  errorMessage,
  type ManifestProject,
  type ObjectOutcome,
  type ObjectStatus,
  type SyncOutcome,
} from "./applier.ts";
export {
  INVENTORY_ID_LABEL,
  type InventoryLocation,
  inventoryLocation,
  type ObjectRef,
  OWNING_INVENTORY_ANNOTATION,
  refKey,
} from "./inventory.ts";
export { MAX_ALIAS_COUNT, type ParsedManifests, parseManifests } from "./parse.ts";
export { type Readiness, readiness } from "./readiness.ts";
