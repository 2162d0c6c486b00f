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
  const root = grpc.loadPackageDefinition(definition);
  /** The constructor at a dotted name in the loaded packages. */
  const at = (name: string): Ctor =>
    name.split(".").reduce<unknown>((node, part) => (node as Record<string, unknown>)[part], root) as Ctor;
  return {
    AgentTracker: at("gitlab.agent.agent_tracker.rpc.AgentTracker"),
    Notifications: at("gitlab.agent.notifications.rpc.Notifications"),
    ConfigurationProject: at("gitlab.agent.configuration_project.rpc.ConfigurationProject"),
    ClusterViewsWatch: at("cluster_views.v1.ClusterViewsWatchService"),
    Health: at("grpc.health.v1.Health"),
    Reflection: at("grpc.reflection.v1.ServerReflection"),
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

interface ReflectionResponse {
  list_services_response?: { service: Array<{ name: string }> };
  file_descriptor_response?: { file_descriptor_proto: Uint8Array[] };
  error_response?: { error_code: number; error_message: string };
}
type ReflectionCall = grpc.ClientDuplexStream<unknown, ReflectionResponse>;

/**
 * Asks server reflection (v1) for the services, and for the file that defines `symbol` (its
 * serialized descriptors as latin1 text, to look for names in), as grpcurl does.
 */
export function listServices(
  reflection: grpc.Client,
  metadata: grpc.Metadata,
  symbol?: string,
): Promise<{ services: string[]; describe: string }> {
  const open = (reflection as unknown as Record<string, (md: grpc.Metadata) => ReflectionCall>)
    .ServerReflectionInfo!;
  const call = open.call(reflection, metadata);
  return new Promise((resolve, reject) => {
    const services: string[] = [];
    let describe = "";
    call.on("data", (res: ReflectionResponse) => {
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

/** The error a call must end with; rejects if it succeeds instead. */
export function failure(call: Promise<unknown>): Promise<grpc.ServiceError> {
  return call.then(
    () => {
      throw new Error("the call succeeded; a failure was expected");
    },
    (err: grpc.ServiceError) => err,
  );
}
