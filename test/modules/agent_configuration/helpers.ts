// Shared by the agent configuration end-to-end tests: GitLab's calls to kas's API, and metrics.
import { gitlabJwt } from "../../kas/support/fixtures.ts";
import type { InProcessKas } from "../../kas/support/in-process.ts";

/** A request to kas's GitLab API front, with GitLab's JWT. */
export async function kasApi(kas: InProcessKas, path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(`${kas.addresses.api}${path}`, {
    ...init,
    headers: { "gitlab-kas-api-request": await gitlabJwt(kas.apiSecret), ...init.headers },
  });
}

/** GitLab's git push notification for `project`, sent to this replica; resolves with the status. */
export async function pushTo(
  kas: InProcessKas,
  project: { id?: number; full_path?: string },
): Promise<number> {
  const res = await kasApi(kas, "/api/v1/notifications/git_push", {
    method: "POST",
    body: JSON.stringify({ project }),
    headers: { "content-type": "application/json" },
  });
  await res.arrayBuffer();
  return res.status;
}

export interface Shown {
  agent_id: string;
  commit_id: string | null;
  configuration: { observability: { logging: { level: string } } } & Record<string, unknown>;
  last_error?: { kind: string; message: string; commitId?: string };
}

/** `GET /api/v1/agents/{id}/configuration` on this replica: the status and the body. */
export async function shown(
  kas: InProcessKas,
  agentId: number | string,
): Promise<{ status: number; body: Shown }> {
  const res = await kasApi(kas, `/api/v1/agents/${agentId}/configuration`);
  return { status: res.status, body: (await res.json()) as Shown };
}

export async function metricsOf(url: string): Promise<string> {
  return (await fetch(`${url}/metrics`)).text();
}

/** The sum of a metric's samples whose labels include all of `labels`. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = m[2] ?? "";
    if (Object.entries(labels).every(([k, v]) => have.includes(`${k}="${v}"`))) sum += Number(m[3]);
  }
  return sum;
}

/** A static tokens file line: an agent whose configuration project is the local git repository `repository`. */
export function tokenLine(
  token: string,
  agent: { agentId: number; projectId: number; agentName: string; repository: string },
): string {
  const { agentId, projectId, agentName, repository } = agent;
  return `${token}: {agentId: ${agentId}, projectId: ${projectId}, agentName: ${agentName}, repository: ${JSON.stringify(repository)}}`;
}
