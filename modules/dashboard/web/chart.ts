// The agent's history as small step charts (inline SVG: no charting library, the page stays
// light), one per count, each change marked on the time axis. Counts hold between samples, so a
// quiet agent's line runs on to now.
import { html } from "htm/preact";
import type { Change, Sample } from "../api.ts";
import { absoluteTime } from "./time.ts";

const W = 300;
const H = 48;

export interface Series {
  label: string;
  value: (s: Sample) => number;
}

export const SERIES: readonly Series[] = [
  { label: "Nodes ready", value: (s) => s.nodesReady },
  { label: "Pods running", value: (s) => s.pods.Running },
  { label: "Pods pending or failed", value: (s) => s.pods.Pending + s.pods.Failed + s.pods.Unknown },
  { label: "Restarts", value: (s) => s.restarts },
  { label: "Warnings", value: (s) => s.warnings },
  { label: "Rollouts in progress", value: (s) => s.rollouts },
];

/** The step line's points: each sample's value held until the next, the last one until `to`. */
export function stepPath(samples: Sample[], value: (s: Sample) => number, from: number, to: number): string {
  if (samples.length === 0) return "";
  const max = Math.max(1, ...samples.map(value));
  const x = (t: number) => (((Math.max(t, from) - from) / Math.max(1, to - from)) * W).toFixed(1);
  const y = (v: number) => (H - 4 - (v / max) * (H - 8)).toFixed(1);
  let d = `M${x(samples[0]!.t)},${y(value(samples[0]!))}`;
  for (let i = 1; i < samples.length; i++) {
    d += ` H${x(samples[i]!.t)} V${y(value(samples[i]!))}`;
  }
  return `${d} H${x(to)}`;
}

export function HistoryCharts({
  samples,
  changes,
  now,
}: {
  samples: Sample[];
  changes: Change[];
  now: number;
}) {
  if (samples.length === 0) return html`<p class="none">No history yet.</p>`;
  // The span recorded (kas keeps up to two hours), a minute at least.
  const from = Math.min(samples[0]!.t, now - 60_000);
  const x = (at: string) => ((Date.parse(at) - from) / Math.max(1, now - from)) * W;
  const marks = changes.filter((c) => Date.parse(c.at) >= from);
  return html`<div class="charts" data-field="history">
    <p class="axis">from ${absoluteTime(from)} to now; dashed lines: changes</p>
    ${SERIES.map((s) => {
      const last = s.value(samples.at(-1)!);
      return html`<figure class="chart" key=${s.label}>
        <figcaption><span>${s.label}</span> <strong>${last}</strong></figcaption>
        <svg viewBox=${`0 0 ${W} ${H}`} preserveAspectRatio="none" role="img" aria-label=${`${s.label} over time, now ${last}`}>
          ${marks.map(
            (c) => html`<line class=${`mark ${c.kind}`} x1=${x(c.at)} x2=${x(c.at)} y1="0" y2=${H}>
              <title>${absoluteTime(c.at)}: ${c.object} ${c.text}</title>
            </line>`,
          )}
          <path d=${stepPath(samples, s.value, from, now)} />
        </svg>
      </figure>`;
    })}
  </div>`;
}
