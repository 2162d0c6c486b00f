// GitLab's side of kas's gRPC API in tests: clients built from the .proto files at run time (as
// GitLab's Ruby stubs are, from the same wire names), not from kas's generated code.
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { protoPath as healthProtoPath } from "grpc-health-check";

const PROTO_ROOT = fileURLToPath(new URL("../../proto/", import.meta.url));
const REFLECTION_PROTO = fileURLToPath(
  new URL(
    "../../node_modules/@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto",
    import.meta.url,
  ),
);

type Ctor = grpc.ServiceClientConstructor;

/** Every service kas offers GitLab, plus health and reflection, as generic grpc-js clients. */
export function gitlabServiceClients(): {
  AgentTracker: Ctor;
  Notifications: Ctor;
  ConfigurationProject: Ctor;
  ClusterViewsWatch: Ctor;
  Health: Ctor;
  Reflection: Ctor;
} {
  const definition = protoLoader.loadSync(
    [
      "agent_tracker/v1/gitlab_rpc.proto",
      "agent_configuration/v1/notifications_rpc.proto",
      "agent_configuration/v1/configuration_project_rpc.proto",
      "cluster_views/v1/watch.proto",
      healthProtoPath,
      REFLECTION_PROTO,
    ],
    { includeDirs: [PROTO_ROOT], keepCase: true, longs: String, enums: String, defaults: true },
  );
  const root = grpc.loadPackageDefinition(definition) as unknown as Record<string, any>;
  return {
    AgentTracker: root.gitlab.agent.agent_tracker.rpc.AgentTracker,
    Notifications: root.gitlab.agent.notifications.rpc.Notifications,
    ConfigurationProject: root.gitlab.agent.configuration_project.rpc.ConfigurationProject,
    ClusterViewsWatch: root.cluster_views.v1.ClusterViewsWatchService,
    Health: root.grpc.health.v1.Health,
    Reflection: root.grpc.reflection.v1.ServerReflection,
  };
}

/** GitLab's metadata: `authorization: bearer <jwt>` (Gitlab::Kas::Client#metadata). */
export function bearer(jwt: string): grpc.Metadata {
  const metadata = new grpc.Metadata();
  metadata.set("authorization", `bearer ${jwt}`);
  return metadata;
}

/** `host:port` of an `http://` or `https://` URL, as a grpc-js target. */
export function grpcTarget(url: string): string {
  return new URL(url).host;
}

/** A unary call as a promise: resolves with the answer, rejects with the ServiceError. */
export function unary<Res>(
  client: grpc.Client,
  method: string,
  request: unknown,
  metadata: grpc.Metadata,
  options: grpc.CallOptions = {},
): Promise<Res> {
  const fn = (client as unknown as Record<string, Function>)[method]!;
  return new Promise((resolve, reject) =>
    fn.call(client, request, metadata, options, (err: grpc.ServiceError | null, res: Res) =>
      err ? reject(err) : resolve(res),
    ),
  );
}

/**
 * Asks server reflection (v1) for the services, and for the file that defines `symbol` (its
 * serialized descriptors as latin1 text, to look for names in), as grpcurl does.
 */
export function listServices(
  reflection: grpc.Client,
  metadata: grpc.Metadata,
  symbol?: string,
): Promise<{ services: string[]; describe: string }> {
  const call = (
    reflection as unknown as Record<string, (md: grpc.Metadata) => grpc.ClientDuplexStream<unknown, any>>
  ).ServerReflectionInfo!.call(reflection, metadata);
  return new Promise((resolve, reject) => {
    const services: string[] = [];
    let describe = "";
    call.on("data", (res) => {
      for (const s of res.list_services_response?.service ?? []) services.push(s.name);
      for (const f of res.file_descriptor_response?.file_descriptor_proto ?? []) {
        describe += Buffer.from(f).toString("latin1");
      }
      if (res.error_response)
        reject(Object.assign(new Error(res.error_response.error_message), res.error_response));
    });
    call.on("error", reject);
    call.on("end", () => resolve({ services, describe }));
    call.write({ list_services: "" });
    if (symbol) call.write({ file_containing_symbol: symbol });
    call.end();
  });
}
