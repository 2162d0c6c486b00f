// Git push notifications between kas replicas: GitLab tells one replica that a project was pushed
// to; every module that polls Git hears it on every replica and polls that project at once.
import { z } from "zod";
import type { Logger } from "../../tool/observability/index.ts";
import type { Broadcast } from "./kas.ts";

const GIT_PUSH_CHANNEL = "git_push";

/** Which project was pushed to: GitLab's project id, or its full path. */
export interface PushedProject {
  id?: string;
  fullPath?: string;
}

/** As it travels between replicas (checked on arrival: a Redis channel is no trusted input). */
const pushedProject = z
  .object({
    id: z
      .string()
      .regex(/^[1-9]\d{0,18}$/)
      .optional(),
    fullPath: z.string().min(1).max(1024).optional(),
  })
  .strict();

/** Tells every replica (this one at once); rejects when Redis could not take it. */
export function publishGitPush(broadcast: Broadcast, project: PushedProject): Promise<void> {
  return broadcast.publish(GIT_PUSH_CHANNEL, JSON.stringify(project));
}

/**
 * What GitLab's notification does, over HTTP or gRPC: every replica hears of the push; when Redis
 * cannot take it, this replica polls anyway and the others find the change at their next poll.
 */
export async function announceGitPush(
  broadcast: Broadcast,
  log: Logger,
  project: PushedProject,
): Promise<void> {
  try {
    await publishGitPush(broadcast, project);
  } catch (err) {
    log.warn({ err: (err as Error).message, project }, "git push: cannot tell the other kas replicas");
  }
}

/** Calls `onPush` for every push any replica was told of; returns a function that stops. */
export function onGitPush(
  broadcast: Broadcast,
  log: Logger,
  onPush: (project: PushedProject) => void,
): () => void {
  return broadcast.subscribe(GIT_PUSH_CHANNEL, (message) => {
    let project: PushedProject;
    try {
      project = pushedProject.parse(JSON.parse(message));
    } catch {
      log.warn({ message: message.slice(0, 200) }, "git push: a malformed message from another replica");
      return;
    }
    onPush(project);
  });
}

/**
 * What a module that polls Git does with every push any replica was told of: `watches` polls the
 * project at once if it follows it; `pushes` counts the notification as polled or unknown (nothing
 * here follows it). Returns a function that stops.
 */
export function pollOnGitPush(
  broadcast: Broadcast,
  log: Logger,
  watches: { pushed(project: PushedProject): number },
  pushes: { inc(labels: { result: "polled" | "unknown" }): void },
): () => void {
  return onGitPush(broadcast, log, (project) => {
    const polled = watches.pushed(project);
    pushes.inc({ result: polled > 0 ? "polled" : "unknown" });
  });
}
