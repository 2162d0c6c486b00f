// One agent: whether it is connected, its nodes and pods, rollouts in progress, latest warnings.
import { html } from "htm/preact";
import type { AgentViews } from "../../cluster_views/views.ts";
import { formatBytes, formatCpu, podTotals, rolloutsInProgress } from "./state.ts";

/** Warnings shown per agent (the view holds more). */
const WARNINGS_SHOWN = 5;

export function AgentCard({ agent }: { agent: AgentViews }) {
  const { nodes, workloads, warnings } = agent.views;
  const pods = podTotals(agent);
  const rollouts = rolloutsInProgress(agent);
  const status = agent.connected ? "connected" : "disconnected";
  return html`
    <section class=${`agent ${status}`} data-agent=${agent.agentId}>
      <header>
        <h2>Agent ${agent.agentId}</h2>
        <span class=${`badge ${status}`} data-field="status">${status}</span>
        <time datetime=${agent.updatedAt} title="views updated">${new Date(agent.updatedAt).toLocaleTimeString()}</time>
      </header>
      <div class="stats">
        <div class="stat" data-field="nodes">
          <span class="label">Nodes ready</span>
          <span class=${`value ${nodes && nodes.ready < nodes.total ? "bad" : ""}`} data-field="nodes-ready">${
            nodes ? `${nodes.ready}/${nodes.total}` : "–"
          }</span>
          ${
            nodes &&
            html`<span class="detail">${formatCpu(nodes.allocatable.cpuMillis)} CPU · ${formatBytes(nodes.allocatable.memoryBytes)}</span>`
          }
        </div>
        <div class="stat">
          <span class="label">Pods</span>
          <span class="value" data-field="pods">${agent.views.pods ? pods.total : "–"}</span>
          <span class="detail">${pods.running} running · ${pods.pending} pending · ${pods.failed} failed · ${pods.restarts} restarts</span>
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
                  <span class="progress">${r.updated}/${r.desired} updated · ${r.ready} ready · ${r.available} available</span>
                  <span class=${`badge ${r.state}`}>${r.state}</span>
                </li>`,
              )}
            </ul>`
      }
      <h3>Warnings</h3>
      ${
        (warnings?.latest.length ?? 0) === 0
          ? html`<p class="none" data-field="warnings">none</p>`
          : html`<ul class="warnings" data-field="warnings">
              ${warnings!.latest.slice(0, WARNINGS_SHOWN).map(
                (w) => html`<li key=${`${w.namespace}/${w.object}/${w.reason}`}>
                  <span class="reason">${w.reason}</span>
                  <span class="object">${w.namespace}/${w.object}</span>
                  <span class="message">${w.message}${w.count > 1 ? ` (×${w.count})` : ""}</span>
                </li>`,
              )}
            </ul>`
      }
    </section>
  `;
}
