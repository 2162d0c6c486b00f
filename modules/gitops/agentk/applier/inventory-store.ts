// Reading and writing a project's inventory ConfigMap (its format is inventory.ts's).
import { type KubernetesObject, PatchStrategy } from "@kubernetes/client-node";
import {
  entriesOf,
  INVENTORY_ID_LABEL,
  INVENTORY_PROJECT_ANNOTATION,
  type InventoryEntries,
  type InventoryLocation,
  inventoryData,
} from "./inventory.ts";
import { errorMessage, type ObjectApi, statusCode } from "./kube.ts";

/** The inventory's entries (none when it does not exist yet), or the problem reading it. */
export async function readInventory(
  api: ObjectApi,
  location: InventoryLocation,
): Promise<{ entries: InventoryEntries } | { error: string }> {
  try {
    const cm = (await api.read({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: location.name, namespace: location.namespace },
    })) as KubernetesObject & { data?: Record<string, string> };
    return { entries: entriesOf(cm.data) };
  } catch (err) {
    if (statusCode(err) === 404) return { entries: new Map() };
    return {
      error: `cannot read the inventory ${location.namespace}/${location.name}: ${errorMessage(err)}`,
    };
  }
}

/** Writes the inventory (server-side apply); resolves with the problem, or undefined. */
export async function writeInventory(
  api: ObjectApi,
  fieldManager: string,
  location: InventoryLocation,
  projectId: string,
  entries: InventoryEntries,
): Promise<string | undefined> {
  try {
    await api.patch(
      {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: {
          name: location.name,
          namespace: location.namespace,
          labels: { [INVENTORY_ID_LABEL]: location.id },
          annotations: { [INVENTORY_PROJECT_ANNOTATION]: projectId },
        },
        data: inventoryData(entries),
      } as KubernetesObject,
      undefined,
      undefined,
      fieldManager,
      true,
      PatchStrategy.ServerSideApply,
    );
    return undefined;
  } catch (err) {
    return `cannot write the inventory ${location.namespace}/${location.name}: ${errorMessage(err)}`;
  }
}
