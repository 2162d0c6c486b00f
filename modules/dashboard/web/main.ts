// The dashboard page: every agent's cluster views, live. preact + htm (no build step of its own:
// kas bundles this with esbuild).
import { html, render } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import type { ViewEvent } from "../../cluster_views/views.ts";
import { AgentCard } from "./agent-card.ts";
import { followEvents, type LinkState } from "./live.ts";
import { type Agents, applyEvent, sortedAgents } from "./state.ts";
import "./style.css";

function App({ withLogout }: { withLogout: boolean }) {
  const [agents, setAgents] = useState<Agents>(new Map());
  const [link, setLink] = useState<LinkState>("connecting");
  useEffect(
    () => followEvents((event: ViewEvent) => setAgents((current) => applyEvent(current, event)), setLink),
    [],
  );
  const list = sortedAgents(agents);
  return html`
    <header class="top">
      <h1>Cluster views</h1>
      <span class=${`link ${link}`} data-field="link">${link}</span>
      ${
        withLogout &&
        html`<form method="post" action="/logout"><button type="submit" class="logout">Log out</button></form>`
      }
    </header>
    <main>
      ${
        list.length === 0
          ? html`<p class="empty" data-field="empty">No agent has reported views yet.</p>`
          : list.map((agent) => html`<${AgentCard} key=${agent.agentId} agent=${agent} />`)
      }
    </main>
  `;
}

render(
  html`<${App} withLogout=${document.body.dataset.logout === "true"} />`,
  document.getElementById("app")!,
);
