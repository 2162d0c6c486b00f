// An informer over one custom resource in every namespace (the runtime's retrying informer).
import {
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  Watch,
} from "@kubernetes/client-node";
import { type InformerHandlers, type InformerOptions, RetryingInformer } from "../../runtime/informer.ts";

export interface CustomKind {
  group: string;
  version: string;
  plural: string;
}

export function customInformer<T extends KubernetesObject>(
  kc: KubeConfig,
  kind: CustomKind,
  handlers: InformerHandlers<T>,
  options: InformerOptions,
): RetryingInformer<T> {
  const api = kc.makeApiClient(CustomObjectsApi);
  return new RetryingInformer<T>(
    {
      path: `/apis/${kind.group}/${kind.version}/${kind.plural}`,
      list: async () => (await api.listClusterCustomObject({ ...kind })) as KubernetesListObject<T>,
      watch: new Watch(kc),
      resource: `${kind.plural}.${kind.group}`,
    },
    handlers,
    options,
  );
}
