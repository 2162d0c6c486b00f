// The module's routes on GitLab's API front: an agent's effective configuration, and git push
// notifications (GitLab sends one when a project is pushed to).
import { z } from "zod";
import { HttpError, sendJson } from "../../../tool/http/serve/index.ts";
import type { Logger } from "../../../tool/observability/index.ts";
import { unsupportedSections } from "../../agentcfg/index.ts";
import {
  type ApiRoute,
  agentStateRoute,
  announceGitPush,
  type Broadcast,
  type PushedProject,
} from "../../runtime/index.ts";
import type { StatusStore } from "./status-store.ts";

/**
 * `GET /api/v1/agents/{agent_id}/configuration` -> the effective configuration, its commit, the
 * sections it sets that this agent does not act on (`unsupported`), and the last problem.
 */
export function configurationRoute(store: StatusStore): ApiRoute {
  return agentStateRoute("configuration", {
    what: "agent configuration state",
    read: (agentId) => store.get(agentId),
    answer(res, agentId, state) {
      if (state === undefined) {
        throw new HttpError(
          404,
          `agent ${agentId} is not connected to any kas replica, or its configuration was not read yet`,
        );
      }
      const known = state.commitId !== undefined;
      sendJson(res, 200, {
        agent_id: agentId,
        commit_id: state.commitId ?? null,
        configuration: known ? state.configuration : null,
        unsupported: known ? unsupportedSections(state.configuration) : [],
        ...(state.problem && { last_error: state.problem }),
        ...(state.checkedAt && { checked_at: state.checkedAt }),
      });
    },
  });
}

const MAX_PUSH_BODY = 64 * 1024;

const pushBody = z.object({
  project: z
    .object({
      id: z.union([z.number().int().positive(), z.string().regex(/^[1-9]\d{0,18}$/)]).optional(),
      full_path: z.string().min(1).max(1024).optional(),
    })
    .refine((p) => p.id !== undefined || p.full_path !== undefined, "needs id or full_path"),
});

/**
 * `POST /api/v1/notifications/git_push` with `{"project": {"id": N, "full_path": "group/project"}}`:
 * every replica polls that project's agents at once (204, whether or not any agent uses it; with
 * Redis down, this replica alone).
 */
export function gitPushRoute(broadcast: Broadcast, log: Logger): ApiRoute {
  return {
    route: "/api/v1/notifications/git_push",
    matches: (pathname) => pathname === "/api/v1/notifications/git_push",
    async handle(req, res) {
      if (req.method !== "POST") throw new HttpError(405, "only POST is allowed here", { allow: "POST" });
      const body = await readJson(req, MAX_PUSH_BODY);
      const parsed = pushBody.safeParse(body);
      if (!parsed.success) {
        const issue = parsed.error.issues[0]!;
        throw new HttpError(400, `body: ${issue.path.join(".") || "(top level)"}: ${issue.message}`);
      }
      const { id, full_path } = parsed.data.project;
      const project: PushedProject = {
        ...(id !== undefined && { id: String(id) }),
        ...(full_path !== undefined && { fullPath: full_path }),
      };
      await announceGitPush(broadcast, log, project);
      res.writeHead(204).end();
    },
  };
}

async function readJson(req: AsyncIterable<Buffer>, limit: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > limit) throw new HttpError(413, `the body is limited to ${limit} bytes`);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    throw new HttpError(400, "the body is not JSON");
  }
}
