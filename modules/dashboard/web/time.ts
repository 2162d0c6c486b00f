// Times as a person reads them: how long ago, and the date and time in the viewer's own zone
// (named), never a bare "4:55:25 AM".
import { html } from "htm/preact";

const ABSOLUTE = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  timeZoneName: "short",
});
const RELATIVE = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });

export function absoluteTime(iso: string | number): string {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? "unknown time" : ABSOLUTE.format(d);
}

export function relativeTime(iso: string | number, now: number): string {
  const ms = new Date(iso).getTime();
  if (Number.isNaN(ms)) return "unknown";
  const s = Math.round((ms - now) / 1000);
  const abs = Math.abs(s);
  if (abs < 60) return RELATIVE.format(s, "second");
  if (abs < 3600) return RELATIVE.format(Math.round(s / 60), "minute");
  if (abs < 86400) return RELATIVE.format(Math.round(s / 3600), "hour");
  return RELATIVE.format(Math.round(s / 86400), "day");
}

/** "5 minutes ago (27 Nov 2026, 10:14:39 UTC)", with the machine-readable time. */
export function Time({ at, now, label }: { at: string; now: number; label?: string }) {
  return html`<time datetime=${at} title=${label ?? absoluteTime(at)}
    >${relativeTime(at, now)} <span class="abs">(${absoluteTime(at)})</span></time
  >`;
}
