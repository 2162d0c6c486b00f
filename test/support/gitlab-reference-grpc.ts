// GitLab as it is: clients of kas built at run time from GitLab's own .proto files
// (test/support/gitlab-protos, copied from GitLab's agent repository), not from kas's proto/.
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

const GITLAB_PROTOS = fileURLToPath(new URL("./gitlab-protos/", import.meta.url));
/** `validate/validate.proto`, which GitLab's files import: protoc-gen-validate's, as grpc-js ships it. */
const VALIDATE_PROTOS = fileURLToPath(
  new URL("../../node_modules/@grpc/grpc-js/proto/protoc-gen-validate/", import.meta.url),
);

type Ctor = grpc.ServiceClientConstructor;

/** GitLab v16.5's AgentTracker and ConfigurationProject, as generic grpc-js clients. */
export function gitlabReferenceClients(): { AgentTracker: Ctor; ConfigurationProject: Ctor } {
  const at = load([
    "internal/module/agent_tracker/rpc/rpc.proto",
    "internal/module/configuration_project/rpc/rpc.proto",
  ]);
  return {
    AgentTracker: at("gitlab.agent.agent_tracker.rpc.AgentTracker"),
    ConfigurationProject: at("gitlab.agent.configuration_project.rpc.ConfigurationProject"),
  };
}

/**
 * GitLab v16.5's Notifications (what GitLab calls on a push) and GitLabFlux (what GitLab's agentk
 * calls over its tunnel), as generic grpc-js clients.
 */
export function gitlabReferenceFluxClients(): { Notifications: Ctor; GitLabFlux: Ctor } {
  const at = load(["internal/module/notifications/rpc/rpc.proto", "internal/module/flux/rpc/rpc.proto"]);
  return {
    Notifications: at("gitlab.agent.notifications.rpc.Notifications"),
    GitLabFlux: at("gitlab.agent.flux.rpc.GitLabFlux"),
  };
}

/** GitLab's files loaded; returns the constructor at a dotted service name. */
function load(files: string[]): (name: string) => Ctor {
  const definition = protoLoader.loadSync(files, {
    includeDirs: [GITLAB_PROTOS, VALIDATE_PROTOS],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const root = grpc.loadPackageDefinition(definition);
  return (name) =>
    name.split(".").reduce<unknown>((node, part) => (node as Record<string, unknown>)[part], root) as Ctor;
}
