// Shared by the GitOps kas tests: a raw GitopsService client over an agent's real tunnel (an
// in-process agentk whose test module hands over its kas channel), and a stream's messages as commits.
import * as grpc from "@grpc/grpc-js";
import { type AgentkModuleFactory, Phase } from "../../../../modules/runtime/index.ts";
import {
  type GetObjectsToSynchronizeRequest,
  type GetObjectsToSynchronizeResponse,
  GitopsServiceClient,
  type ReportSyncRequest,
} from "../../../../proto/gen/gitops/v1/gitops.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../../support/agentk-in-process.ts";
import { until } from "../../../support/until.ts";

/** An agentk connected to kas, and a GitopsService client over its tunnel's gRPC channel. */
export async function agentWithRawClient(
  kasUrl: string,
  token: string,
): Promise<{ agent: InProcessAgentk; client: GitopsServiceClient }> {
  let channel: grpc.Channel | undefined;
  const capture: AgentkModuleFactory = {
    name: "test_capture_channel",
    phase: Phase.capability,
    create: ({ kasRpc }) => {
      channel = kasRpc;
      return { name: "test_capture_channel" };
    },
  };
  const agent = await startInProcessAgentk({ kasUrl, token, modules: [capture] });
  await until(() => channel !== undefined, 10_000, "the agent's kas channel");
  const client = new GitopsServiceClient("kas", grpc.credentials.createInsecure(), {
    channelOverride: channel!,
  });
  return { agent, client };
}

export interface Commit {
  commitId: string;
  projectId: string;
  /** path -> content, in the order sent. */
  files: Map<string, Buffer>;
  /** Object messages per path. */
  chunks: Map<string, number[]>;
}

export interface Stream {
  messages: GetObjectsToSynchronizeResponse[];
  readonly status: grpc.StatusObject | undefined;
  /** The complete commits (header ... trailer) received so far. */
  commits(): Commit[];
  cancel(): void;
}

export function request(
  projectId: string,
  globs: string[],
  more: Partial<GetObjectsToSynchronizeRequest> = {},
): GetObjectsToSynchronizeRequest {
  return { projectId, commitId: "", paths: globs.map((glob) => ({ glob })), ref: undefined, ...more };
}

export function openStream(client: GitopsServiceClient, req: GetObjectsToSynchronizeRequest): Stream {
  const messages: GetObjectsToSynchronizeResponse[] = [];
  let status: grpc.StatusObject | undefined;
  const call = client.getObjectsToSynchronize(req, new grpc.Metadata({ waitForReady: true }));
  call.on("data", (m: GetObjectsToSynchronizeResponse) => messages.push(m));
  call.on("error", () => {});
  call.on("status", (s: grpc.StatusObject) => {
    status = s;
  });
  return {
    messages,
    get status() {
      return status;
    },
    commits: () => toCommits(messages),
    cancel: () => call.cancel(),
  };
}

/** Groups messages into commits; checks the protocol on the way (objects only inside a commit). */
export function toCommits(messages: readonly GetObjectsToSynchronizeResponse[]): Commit[] {
  const done: Commit[] = [];
  let current: Commit | undefined;
  let lastSource: string | undefined;
  for (const m of messages) {
    if (m.header) {
      if (current) throw new Error("a header inside a commit");
      current = {
        commitId: m.header.commitId,
        projectId: m.header.projectId,
        files: new Map(),
        chunks: new Map(),
      };
      lastSource = undefined;
    } else if (m.object) {
      if (!current) throw new Error("an object outside a commit");
      const { source, data } = m.object;
      const have = current.files.get(source);
      if (have && lastSource !== source) throw new Error(`${source}: parts not consecutive`);
      current.files.set(source, Buffer.concat([have ?? Buffer.alloc(0), data]));
      current.chunks.set(source, [...(current.chunks.get(source) ?? []), data.length]);
      lastSource = source;
    } else if (m.trailer) {
      if (!current) throw new Error("a trailer outside a commit");
      done.push(current);
      current = undefined;
    }
  }
  return done;
}

/** The files of a commit as path -> text. */
export function texts(commit: Commit): Record<string, string> {
  return Object.fromEntries([...commit.files].map(([p, b]) => [p, b.toString("utf8")]));
}

export function reportSync(
  client: GitopsServiceClient,
  req: Partial<ReportSyncRequest>,
): Promise<grpc.ServiceError | null> {
  const full: ReportSyncRequest = {
    projectId: "",
    commitId: "",
    durationMs: "0",
    objects: [],
    error: "",
    mode: "",
    ...req,
  };
  return new Promise((resolve) => client.reportSync(full, (err) => resolve(err)));
}

/** A static tokens file line whose agent may read `manifests` (full path -> local repository). */
export function tokenLine(
  token: string,
  agent: { agentId: number; projectId: number; agentName: string; manifests: Record<string, string> },
): string {
  return `${token}: ${JSON.stringify({
    agentId: agent.agentId,
    projectId: agent.projectId,
    agentName: agent.agentName,
    manifest_projects: agent.manifests,
  })}`;
}
