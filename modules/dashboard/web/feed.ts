// What changed, across every agent, newest first: the object, what happened, and when.
import { html } from "htm/preact";
import type { Change } from "../api.ts";
import { Time } from "./time.ts";

const ICON: Record<Change["kind"], string> = {
  scaled: "⇅",
  "rollout-started": "↻",
  "rollout-stuck": "⚠",
  "rolled-out": "✓",
  "node-not-ready": "⚠",
  "node-ready": "✓",
  "pod-trouble": "⚠",
  warning: "⚠",
  connected: "●",
  disconnected: "○",
};
const BAD = new Set<Change["kind"]>([
  "rollout-stuck",
  "node-not-ready",
  "pod-trouble",
  "warning",
  "disconnected",
]);

export function ChangeFeed({
  changes,
  nameOf,
  now,
}: {
  changes: Change[];
  nameOf: (agentId: string) => string;
  now: number;
}) {
  return html`<section class="feed" aria-labelledby="feed-title">
    <h2 id="feed-title">What changed</h2>
    ${
      changes.length === 0
        ? html`<p class="none" data-field="feed">Nothing yet.</p>`
        : html`<ol data-field="feed">
            ${changes.map(
              (
                c,
              ) => html`<li key=${`${c.agentId}/${c.at}/${c.kind}/${c.object}/${c.text}`} class=${BAD.has(c.kind) ? "bad" : ""} data-kind=${c.kind}>
                <span class="icon" aria-hidden="true">${ICON[c.kind]}</span>
                <span class="what"><strong>${c.object}</strong> ${c.text}</span>
                <span class="where">${nameOf(c.agentId)}</span>
                <${Time} at=${c.at} now=${now} />
              </li>`,
            )}
          </ol>`
    }
  </section>`;
}
