// One agent: who it is and its state at a glance (connection, versions, configuration, GitOps,
// views' freshness, what is wrong), and, opened, the drill-down: nodes and their conditions, pods
// per namespace and phase, pods in trouble, rollouts and why they are not done, warnings and the
// object behind each, and the history's charts.
import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import type { AgentViews } from "../../cluster_views/views.ts";
import type { AgentHistory, AgentStatus } from "../api.ts";
import { HistoryCharts } from "./chart.ts";
import { formatBytes, formatCpu, podTotals, rolloutsInProgress } from "./state.ts";
import { Time } from "./time.ts";
import type { Trouble } from "./trouble.ts";

/** Problems listed on the card, worst first (the rest counted). */
const PROBLEMS_SHOWN = 6;

const short = (commit: string | undefined) => (commit ? commit.slice(0, 8) : "none");

export function agentName(agentId: string, status: AgentStatus | undefined): string {
  return status?.name ?? `agent ${agentId}`;
}

export function AgentCard({
  agentId,
  agent,
  status,
  trouble,
  now,
}: {
  agentId: string;
  agent: AgentViews | undefined;
  status: AgentStatus | undefined;
  trouble: Trouble;
  now: number;
}) {
  const connected = agent ? agent.connected : (status?.tunnels ?? 0) > 0;
  const state = connected ? "connected" : "disconnected";
  const level = trouble.score >= 20 || !connected ? "bad" : trouble.score > 0 ? "warn" : "ok";
  const views = agent?.views ?? {};
  const { nodes, workloads } = views;
  const pods = agent ? podTotals(agent) : undefined;
  const rollouts = agent ? rolloutsInProgress(agent) : [];
  const versions = [...new Set((status?.agentk ?? []).map((p) => p.version))];
  const kube = [...new Set((status?.agentk ?? []).flatMap((p) => (p.kubernetes ? [p.kubernetes] : [])))];
  return html`
    <section class=${`agent ${state} trouble-${level}`} data-agent=${agentId} aria-labelledby=${`agent-${agentId}`}>
      <header>
        <h2 id=${`agent-${agentId}`} data-field="name">${agentName(agentId, status)}</h2>
        <span class="id">#${agentId}${status?.projectId ? ` · project ${status.projectId}` : ""}</span>
        <span class=${`badge ${state}`} data-field="status">${connected ? "● connected" : "○ disconnected"}</span>
      </header>
      ${
        trouble.problems.length > 0
          ? html`<ul class="problems" data-field="problems" aria-label="What is wrong">
              ${trouble.problems.slice(0, PROBLEMS_SHOWN).map((p) => html`<li key=${p}><span aria-hidden="true">⚠ </span>${p}</li>`)}
              ${trouble.problems.length > PROBLEMS_SHOWN && html`<li>and ${trouble.problems.length - PROBLEMS_SHOWN} more</li>`}
            </ul>`
          : html`<p class="fine" data-field="problems"><span aria-hidden="true">✓ </span>nothing wrong</p>`
      }
      <dl class="facts">
        <dt>Replicas</dt>
        <dd data-field="replicas">
          ${status?.agentk.length ?? 0} agentk · ${status?.tunnels ?? 0} tunnel${status?.tunnels === 1 ? "" : "s"}
          ${status?.connectedSince && html`, since <${Time} at=${status.connectedSince} now=${now} />`}
        </dd>
        <dt>Versions</dt>
        <dd data-field="versions">agentk ${versions.join(", ") || "unknown"} · Kubernetes ${kube.join(", ") || "unknown"}</dd>
        <dt>Configuration</dt>
        <dd data-field="configuration">
          ${
            status?.configuration
              ? html`commit <code>${short(status.configuration.commitId)}</code>${
                  status.configuration.problem &&
                  html` <span class="error" role="note">⚠ ${status.configuration.problem.message}</span>`
                }`
              : "unknown"
          }
        </dd>
        <dt>GitOps</dt>
        <dd data-field="gitops">
          ${
            (status?.gitops.length ?? 0) === 0
              ? "no manifest projects"
              : html`<ul class="gitops">
                  ${status!.gitops.map(
                    (g) => html`<li key=${g.project}>
                      <strong>${g.project}</strong> commit <code>${short(g.sync?.commitId ?? g.sent?.commitId)}</code>
                      ${g.sync && html` · ${g.sync.applied} applied, ${g.sync.failed} failed · synced <${Time} at=${g.sync.at} now=${now} />`}
                      ${(g.problem || g.sync?.error) && html` <span class="error">⚠ ${g.problem?.message ?? g.sync?.error}</span>`}
                    </li>`,
                  )}
                </ul>`
          }
        </dd>
        <dt>Views</dt>
        <dd data-field="freshness">${agent ? html`updated <${Time} at=${agent.updatedAt} now=${now} />` : "none yet"}</dd>
      </dl>
      <div class="stats">
        <div class="stat">
          <span class="label">Nodes ready</span>
          <span class=${`value ${nodes && nodes.ready < nodes.total ? "bad" : ""}`} data-field="nodes-ready">${
            nodes ? `${nodes.ready}/${nodes.total}` : "–"
          }</span>
          ${nodes && html`<span class="detail">${formatCpu(nodes.allocatable.cpuMillis)} CPU · ${formatBytes(nodes.allocatable.memoryBytes)}</span>`}
        </div>
        <div class="stat">
          <span class="label">Pods</span>
          <span class="value" data-field="pods">${pods && views.pods ? pods.total : "–"}</span>
          <span class="detail" data-field="pod-phases">${pods?.running ?? 0} running · ${pods?.pending ?? 0} pending · ${pods?.failed ?? 0} failed · <span data-field="restarts">${pods?.restarts ?? 0} restarts</span></span>
        </div>
        <div class="stat">
          <span class="label">Workloads</span>
          <span class="value" data-field="workloads">${workloads ? workloads.total : "–"}</span>
          <span class="detail" data-field="rollouts-count">${rollouts.length} rolling out</span>
        </div>
      </div>
      <h3>Rollouts in progress</h3>
      ${
        rollouts.length === 0
          ? html`<p class="none" data-field="rollouts">none</p>`
          : html`<ul class="rollouts" data-field="rollouts">
              ${rollouts.map(
                (r) => html`<li key=${`${r.kind}/${r.namespace}/${r.name}`} class=${r.state}>
                  <span class="name">${r.kind} ${r.namespace}/${r.name}</span>
                  <span class=${`badge ${r.state}`}>${r.state === "stuck" ? "⚠ stuck" : "↻ progressing"}</span>
                  <span class="progress">${r.updated}/${r.desired} updated · ${r.ready} ready · ${r.available} available</span>
                  ${r.reason && html`<span class="why" data-field="rollout-why">${r.reason}${r.message ? `: ${r.message}` : ""}</span>`}
                </li>`,
              )}
            </ul>`
      }
      <details class="drill">
        <summary>Details: nodes, pods, warnings, history</summary>
        <${Details} agentId=${agentId} agent=${agent} now=${now} />
      </details>
    </section>
  `;
}

function Details({ agentId, agent, now }: { agentId: string; agent: AgentViews | undefined; now: number }) {
  const [history, setHistory] = useState<AgentHistory | undefined>(undefined);
  const seq = agent?.seq ?? 0;
  // Fetched when opened (this renders only then) and again as the agent's views change.
  useEffect(() => {
    let live = true;
    void fetch(`/api/history?agent=${agentId}`)
      .then((r) => (r.ok ? (r.json() as Promise<AgentHistory>) : undefined))
      .then((h) => live && h && setHistory(h));
    return () => {
      live = false;
    };
  }, [agentId, seq]);
  const v = agent?.views ?? {};
  const namespaces = Object.entries(v.pods?.namespaces ?? {});
  return html`<div class="details">
    <h3>Nodes not ready or under pressure</h3>
    ${
      (v.nodes?.problems?.length ?? 0) === 0
        ? html`<p class="none" data-field="node-problems">none</p>`
        : html`<ul class="nodes" data-field="node-problems">
            ${v.nodes!.problems!.map(
              (n) => html`<li key=${n.name}>
                <strong>Node ${n.name}</strong> ${n.ready ? "ready" : html`<span class="bad">⚠ not ready</span>`}
                <ul>${n.conditions.map((c) => html`<li key=${c.type}>${c.type}=${c.status}${c.reason && ` (${c.reason})`}${c.message && `: ${c.message}`}</li>`)}</ul>
              </li>`,
            )}
          </ul>`
    }
    <h3>Pods in trouble or restarting</h3>
    ${
      (v.pods?.problems?.length ?? 0) === 0
        ? html`<p class="none" data-field="pod-problems">none</p>`
        : html`<ul class="pods" data-field="pod-problems">
            ${v.pods!.problems!.map(
              (p) => html`<li key=${`${p.namespace}/${p.name}`}>
                <strong>Pod ${p.namespace}/${p.name}</strong> ${p.phase}${p.reason && html` · <span class="bad">${p.reason}</span>`} · ${p.restarts} restarts
              </li>`,
            )}
          </ul>`
    }
    <h3>Pods per namespace</h3>
    ${
      namespaces.length === 0
        ? html`<p class="none">none</p>`
        : html`<div class="scroll"><table class="namespaces" data-field="namespaces">
            <thead><tr><th scope="col">Namespace</th><th scope="col">Running</th><th scope="col">Pending</th><th scope="col">Failed</th><th scope="col">Succeeded</th><th scope="col">Restarts</th></tr></thead>
            <tbody>${namespaces.map(
              ([name, ns]) =>
                html`<tr key=${name}><th scope="row">${name}</th><td>${ns.phases.Running}</td><td>${ns.phases.Pending}</td><td>${ns.phases.Failed}</td><td>${ns.phases.Succeeded}</td><td>${ns.restarts}</td></tr>`,
            )}</tbody>
          </table></div>`
    }
    <h3>Warnings</h3>
    ${
      (v.warnings?.latest.length ?? 0) === 0
        ? html`<p class="none" data-field="warnings">none</p>`
        : html`<ul class="warnings" data-field="warnings">
            ${v.warnings!.latest.map(
              (w) => html`<li key=${`${w.namespace}/${w.object}/${w.reason}`}>
                <span class="reason">⚠ ${w.reason}</span>
                <span class="object">${w.object.replace("/", ` ${w.namespace}/`)}</span>
                <span class="message">${w.message}${w.count > 1 ? ` (×${w.count})` : ""}</span>
                <${Time} at=${w.lastSeen} now=${now} />
              </li>`,
            )}
          </ul>`
    }
    <h3>History</h3>
    ${history ? html`<${HistoryCharts} samples=${history.samples} changes=${history.changes} now=${now} />` : html`<p class="none">loading…</p>`}
  </div>`;
}
