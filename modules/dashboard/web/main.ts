// The dashboard page: every agent's state and cluster views, live, what changed across them, and
// each agent's drill-down. preact + htm (no build step of its own: kas bundles this with esbuild).
import { html, render } from "htm/preact";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { ViewEvent } from "../../cluster_views/views.ts";
import type { AgentStatus, Change } from "../api.ts";
import { AgentCard, agentName } from "./agent-card.ts";
import { ChangeFeed } from "./feed.ts";
import { followEvents, type LinkState } from "./live.ts";
import { type Agents, applyEvent } from "./state.ts";
import { troubleOf } from "./trouble.ts";
import "./style.css";

/** The status (names, versions, GitOps), the changes and the clock of relative times move at least at this pace. */
const POLL_MS = 10_000;
/** Status and changes are fetched this long after the views moved (a burst of events: one fetch). */
const FEED_DELAY_MS = 500;

const getJson = <T>(path: string): Promise<T | undefined> =>
  fetch(path).then(
    (r) => (r.ok ? (r.json() as Promise<T>) : undefined),
    () => undefined,
  );

function App({ withLogout }: { withLogout: boolean }) {
  const [agents, setAgents] = useState<Agents>(new Map());
  const [statuses, setStatuses] = useState<ReadonlyMap<string, AgentStatus>>(new Map());
  const [changes, setChanges] = useState<Change[]>([]);
  const [link, setLink] = useState<LinkState>("connecting");
  const [now, setNow] = useState(Date.now());
  const [query, setQuery] = useState("");
  const [sort, setSort] = useState<"trouble" | "name">("trouble");
  const [moved, setMoved] = useState(0);

  useEffect(
    () =>
      followEvents((event: ViewEvent) => {
        setAgents((current) => applyEvent(current, event));
        setMoved((n) => n + 1);
      }, setLink),
    [],
  );
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const timer = setInterval(() => setTick((n) => n + 1), POLL_MS);
    return () => clearInterval(timer);
  }, []);
  // Each agent's status and the changes: shortly after the views move, and every POLL_MS (GitOps
  // and configuration change without the views). One fetch at a time: views moving all the time
  // (a hundred agents) cannot put it off for ever.
  const pending = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => {
    pending.current ??= setTimeout(() => {
      pending.current = undefined;
      setNow(Date.now());
      void getJson<{ agents: AgentStatus[] }>("/api/status").then(
        (s) => s && setStatuses(new Map(s.agents.map((a) => [a.agentId, a]))),
      );
      void getJson<{ changes: Change[] }>("/api/changes").then((c) => c && setChanges(c.changes));
    }, FEED_DELAY_MS);
  }, [moved, tick]);

  const rows = useMemo(() => {
    const ids = [...new Set([...agents.keys(), ...statuses.keys()])];
    const q = query.trim().toLowerCase();
    return ids
      .map((id) => {
        const status = statuses.get(id);
        const agent = agents.get(id);
        return { id, agent, status, name: agentName(id, status), trouble: troubleOf(agent, status) };
      })
      .filter(
        (r) => q === "" || `${r.name} #${r.id} ${r.trouble.problems.join(" ")}`.toLowerCase().includes(q),
      )
      .sort(
        (a, b) =>
          (sort === "trouble" ? b.trouble.score - a.trouble.score : 0) ||
          a.name.localeCompare(b.name, "en", { numeric: true }) ||
          a.id.localeCompare(b.id, "en", { numeric: true }),
      );
  }, [agents, statuses, query, sort]);
  const inTrouble = rows.filter((r) => r.trouble.score >= 20).length;
  const nameOf = (id: string) => agentName(id, statuses.get(id));

  return html`
    <header class="top">
      <h1>Cluster views</h1>
      <span class=${`link ${link}`} data-field="link" role="status">${link === "live" ? "● live" : `○ ${link}`}</span>
      ${
        withLogout &&
        html`<form method="post" action="/logout"><button type="submit" class="logout">Log out</button></form>`
      }
    </header>
    <div class="layout">
      <${ChangeFeed} changes=${changes} nameOf=${nameOf} now=${now} />
      <main>
        <div class="toolbar" role="search">
          <label for="search">Find an agent</label>
          <input id="search" type="search" placeholder="name, id or problem" value=${query}
            onInput=${(e: Event) => setQuery((e.target as HTMLInputElement).value)} />
          <label for="sort">Order</label>
          <select id="sort" value=${sort} onChange=${(e: Event) => setSort((e.target as HTMLSelectElement).value as "trouble" | "name")}>
            <option value="trouble">trouble first</option>
            <option value="name">by name</option>
          </select>
          <span class="count" data-field="summary">${rows.length} agent${rows.length === 1 ? "" : "s"} · ${inTrouble} in trouble</span>
        </div>
        ${
          rows.length === 0
            ? html`<p class="empty" data-field="empty">${agents.size === 0 ? "No agent has reported views yet." : "No agent matches."}</p>`
            : html`<div class="agents">${rows.map(
                (r) =>
                  html`<${AgentCard} key=${r.id} agentId=${r.id} agent=${r.agent} status=${r.status} trouble=${r.trouble} now=${now} />`,
              )}</div>`
        }
      </main>
    </div>
  `;
}

render(
  html`<${App} withLogout=${document.body.dataset.logout === "true"} />`,
  document.getElementById("app")!,
);
