import type { IncomingMessage, ServerResponse } from "node:http";
import { groupVersion, type ResourceType } from "./resources.ts";
import { parseFieldSelector, parseLabelSelector } from "./selectors.ts";
import { type KubeObject, type KubeStore, matches, StoreError, type WatchEvent } from "./store.ts";
import { toTable } from "./table.ts";

export interface Watcher {
  /** Sends a BOOKMARK at the store's current version if the client allowed them. */
  bookmark(): void;
  /** Ends the watch, as the real server does at its timeout: the client resumes from its version. */
  end(): void;
}

/**
 * A watch as the real server streams it: one JSON event per line (`ADDED`, `MODIFIED`, `DELETED`,
 * `BOOKMARK`, `ERROR`). From no version (or "0"): the current state as ADDED first. From a version
 * the bounded history no longer holds: a single ERROR event carrying a 410 Expired Status, then the
 * end, as kube-apiserver does. Selectors turn a change that moves an object in or out of the
 * selection into ADDED or DELETED.
 */
export function serveWatch(
  req: IncomingMessage,
  res: ServerResponse,
  store: KubeStore,
  type: ResourceType,
  ns: string | undefined,
  query: URLSearchParams,
  options: { table: boolean; bookmarkIntervalMs: number; watchers: Set<Watcher> },
): void {
  const from = query.get("resourceVersion") ?? "";
  if (from !== "" && !/^\d+$/.test(from)) {
    throw new StoreError(400, "BadRequest", `invalid resourceVersion ${JSON.stringify(from)}`);
  }
  const labels = parseLabelSelector(query.get("labelSelector"));
  const fields = parseFieldSelector(query.get("fieldSelector"));
  const selected = (o: KubeObject) => labels(o) && fields(o);
  const allowBookmarks = query.get("allowWatchBookmarks") === "true";
  const includeObject = query.get("includeObject");
  let first = true;
  const objectOut = (o: KubeObject) => {
    if (!options.table) return o;
    const table = toTable(type, [o], o.metadata.resourceVersion, includeObject, first);
    first = false;
    return table;
  };
  res.writeHead(200, { "content-type": "application/json", "cache-control": "no-cache" });
  res.flushHeaders(); // a watch with nothing to say yet still answers at once
  const send = (type: string, object: unknown) => res.write(`${JSON.stringify({ type, object })}\n`);
  const bookmark = (annotations?: Record<string, string>) =>
    send("BOOKMARK", {
      kind: type.kind,
      apiVersion: groupVersion(type),
      metadata: { resourceVersion: String(store.resourceVersion), ...(annotations && { annotations }) },
    });

  const deliver = (e: WatchEvent) => {
    const now = selected(e.object);
    const before = e.type === "MODIFIED" && e.old !== undefined ? selected(e.old) : now;
    if (e.type === "MODIFIED" && now !== before) return send(now ? "ADDED" : "DELETED", objectOut(e.object));
    if (now) send(e.type, objectOut(e.object));
  };

  if (from === "" || from === "0") {
    for (const o of store.list(type, ns)) if (selected(o)) send("ADDED", objectOut(o));
    if (allowBookmarks && query.get("sendInitialEvents") === "true") {
      bookmark({ "k8s.io/initial-events-end": "true" });
    }
  } else {
    let replay: WatchEvent[];
    try {
      replay = store.since(type, ns, Number(from));
    } catch (err) {
      if (!(err instanceof StoreError) || err.code !== 410) throw err;
      send("ERROR", {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Failure",
        message: err.message,
        reason: "Expired",
        code: 410,
      });
      res.end();
      return;
    }
    for (const e of replay) deliver(e);
  }
  const onChange = (e: WatchEvent) => {
    // A custom resource served at several versions: each watch sees its own.
    if (matches(e, type, ns)) deliver({ ...e, object: { ...e.object, apiVersion: groupVersion(type) } });
  };
  store.on("change", onChange);
  const watcher: Watcher = { bookmark: () => allowBookmarks && bookmark(), end: () => res.end() };
  options.watchers.add(watcher);
  const seconds = Number(query.get("timeoutSeconds") ?? 0);
  const timer = seconds > 0 ? setTimeout(() => res.end(), seconds * 1000) : undefined;
  const ticker = allowBookmarks ? setInterval(() => bookmark(), options.bookmarkIntervalMs) : undefined;
  const stop = () => {
    clearTimeout(timer);
    clearInterval(ticker);
    store.off("change", onChange);
    options.watchers.delete(watcher);
  };
  res.once("close", stop);
  req.once("close", stop);
}
