// The page's link to kas: the agents' event stream (EventSource: reconnects by itself, with
// Last-Event-ID), folded into the state. A 401 means the session ended: back to the login page.
import type { ViewEvent } from "../../cluster_views/views.ts";

export type LinkState = "connecting" | "live" | "reconnecting";

export function followEvents(
  onEvent: (event: ViewEvent) => void,
  onLink: (state: LinkState) => void,
): () => void {
  const source = new EventSource("/api/events");
  const handle = (message: MessageEvent<string>) => onEvent(JSON.parse(message.data) as ViewEvent);
  for (const type of ["snapshot", "change", "connected", "disconnected"]) {
    source.addEventListener(type, handle as EventListener);
  }
  source.onopen = () => onLink("live");
  source.onerror = () => {
    onLink("reconnecting");
    // EventSource gives no status: ask whether the session is still good.
    void fetch("/api/agents", { method: "GET" }).then((res) => {
      if (res.status === 401) window.location.assign("/login");
    });
  };
  return () => source.close();
}
