// What is wrong with an agent, in words, and how much: the page lists agents in trouble first.
import type { AgentViews } from "../../cluster_views/views.ts";
import type { AgentStatus } from "../api.ts";

export interface Trouble {
  /** Higher is worse; 0 is fine. */
  score: number;
  /** One line per problem, worst first. */
  problems: string[];
}

export function troubleOf(agent: AgentViews | undefined, status: AgentStatus | undefined): Trouble {
  const problems: [number, string][] = [];
  if (agent && !agent.connected) problems.push([100, "agent disconnected"]);
  const v = agent?.views ?? {};
  if (v.nodes && v.nodes.ready < v.nodes.total)
    problems.push([50, `${v.nodes.total - v.nodes.ready} of ${v.nodes.total} nodes not ready`]);
  for (const r of v.workloads?.rollouts ?? []) {
    if (r.state === "stuck") problems.push([40, `${r.kind} ${r.namespace}/${r.name} rollout stuck`]);
  }
  const crashing = (v.pods?.problems ?? []).filter((p) => p.reason !== "" || p.phase === "Failed");
  if (crashing.length > 0)
    problems.push([
      30,
      `${crashing.length} pod${crashing.length === 1 ? "" : "s"} in trouble (${crashing[0]!.reason || crashing[0]!.phase})`,
    ]);
  if (status?.configuration?.problem)
    problems.push([20, `configuration: ${status.configuration.problem.message}`]);
  for (const g of status?.gitops ?? []) {
    const error =
      g.problem?.message ??
      g.sync?.error ??
      (g.sync && g.sync.failed > 0 ? `${g.sync.failed} objects failed` : undefined);
    if (error) problems.push([20, `GitOps ${g.project}: ${error}`]);
  }
  for (const r of v.workloads?.rollouts ?? []) {
    if (r.state === "progressing") problems.push([5, `${r.kind} ${r.namespace}/${r.name} rolling out`]);
  }
  const latest = v.warnings?.latest ?? [];
  if (latest.length > 0) {
    const w = latest[0]!;
    const object = w.object.replace("/", ` ${w.namespace}/`);
    problems.push([
      1,
      `${latest.length} warning${latest.length === 1 ? "" : "s"}, latest: ${w.reason} on ${object}`,
    ]);
  }
  problems.sort((a, b) => b[0] - a[0]);
  return { score: problems.reduce((n, [s]) => n + s, 0), problems: problems.map(([, p]) => p) };
}
