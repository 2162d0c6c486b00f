// kas's `ViewsHub`: applies the agents' updates to the store, publishes each applied one to every
// replica (`deps.broadcast`: Redis pub/sub when clustered), and fans what it hears out to this
// replica's subscribers, each starting with a snapshot (or, resuming, with what it missed).
import type { Logger } from "../../../tool/observability/index.ts";
import { parseJsonObject } from "../../../tool/untrusted-json.ts";
import type { Broadcast } from "../../runtime/index.ts";
import { parseClusterViews } from "../limits.ts";
import type { AgentViews, ViewEvent, ViewsHub } from "../views.ts";
import type { ClusterViewsMetrics } from "./metrics.ts";
import type { OpenStream } from "./presence.ts";
import type { ViewsStore, ViewsUpdate } from "./store.ts";

/** The broadcast channel every replica's hub listens on. */
export const VIEWS_CHANNEL = "cluster_views";

export interface HubOptions {
  store: ViewsStore;
  broadcast: Broadcast;
  log: Logger;
  metrics: ClusterViewsMetrics;
  /** Events kept per agent for `Last-Event-ID` resumes. Default 64. */
  historyPerAgent?: number;
  /** Events a subscriber may have waiting while its snapshot is read; beyond, it is dropped. Default 1000. */
  maxPendingEvents?: number;
}

type Filter = Parameters<ViewsHub["subscribe"]>[0];

/**
 * An event kept for resumes: its seq, and its JSON (what parseEvent read it from). A snapshot's
 * JSON is not kept: a snapshot starts the history again, so it is always the oldest event kept,
 * and a resume replays only what came after the oldest (its seq is the boundary).
 */
interface HistoryEntry {
  seq: number;
  json?: string;
}

interface Subscriber {
  filter: Filter;
  listener: (event: ViewEvent) => void;
  onDrop: ((reason: string) => void) | undefined;
  /** Events heard while the first snapshot is read; undefined once live. */
  pending: ViewEvent[] | undefined;
  closed: boolean;
}

/** The agent an event is about. */
export const agentOf = (e: ViewEvent): string => (e.type === "snapshot" ? e.agent.agentId : e.agentId);
/** The agent's seq an event carries (presence events: the state's, from their id). */
const seqOf = (e: ViewEvent): number =>
  e.type === "snapshot" ? e.agent.seq : e.type === "change" ? e.seq : (parseEventId(e.id)?.seq ?? 0);

/** "<agentId>:<seq>" -> its parts; undefined unless it is one. */
export function parseEventId(id: string): { agentId: string; seq: number } | undefined {
  const m = /^([1-9]\d{0,18}):(\d{1,16})$/.exec(id);
  if (!m) return undefined;
  const seq = Number(m[2]);
  return Number.isSafeInteger(seq) ? { agentId: m[1]!, seq } : undefined;
}

export const eventId = (agentId: string, seq: number): string => `${agentId}:${seq}`;

export class Hub implements ViewsHub {
  readonly #o: Required<HubOptions>;
  readonly #subs = new Set<Subscriber>();
  /**
   * Per agent: the newest seq fanned out here, and the recent events (for resumes) as the JSON they
   * came in, a snapshot's not at all: parsed, its views would be a second copy of the store's; a
   * resume parses what it replays again.
   */
  readonly #agents = new Map<string, { seq: number; history: HistoryEntry[] }>();
  #unsubscribe: (() => void) | undefined;

  constructor(options: HubOptions) {
    this.#o = { historyPerAgent: 64, maxPendingEvents: 1000, ...options };
  }

  /** Listens to the other replicas. */
  start(): void {
    this.#unsubscribe ??= this.#o.broadcast.subscribe(VIEWS_CHANNEL, (message) => {
      const event = parseEvent(message);
      if (event) this.#deliver(event, message);
      else this.#o.log.warn({}, "ignored a malformed cluster views event from the broadcast");
    });
  }

  /** Cuts every subscriber with `reason` and stops listening. */
  close(reason: string): void {
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    for (const sub of [...this.#subs]) this.#drop(sub, reason);
  }

  get subscribers(): number {
    return this.#subs.size;
  }

  /** An agent's update from its stream `owner`: stored if newer, then published. Resolves with whether it applied. */
  async update(agentId: string, owner: string, update: ViewsUpdate): Promise<boolean> {
    const at = new Date().toISOString();
    const result = await this.#o.store.apply(agentId, owner, update, at);
    this.#o.metrics.updates.inc({ result: result === "stale" ? "stale" : "applied" });
    if (result === "stale") return false;
    const id = eventId(agentId, update.seq);
    const events: ViewEvent[] = [];
    if (result === "connected") events.push({ type: "connected", id, agentId });
    events.push(
      update.snapshot
        ? {
            type: "snapshot",
            id,
            agent: { agentId, connected: true, seq: update.seq, updatedAt: at, views: update.views },
          }
        : { type: "change", id, agentId, seq: update.seq, updatedAt: at, views: update.views },
    );
    for (const e of events) await this.#publish(e);
    return true;
  }

  /** These streams are still up: the views of their agents live on. */
  refresh(streams: readonly OpenStream[]): Promise<void> {
    return this.#o.store.refresh(streams);
  }

  /** The agent's stream `owner` ended. */
  async disconnected(agentId: string, owner: string): Promise<void> {
    if (!(await this.#o.store.disconnect(agentId, owner))) return;
    const seq = this.#agents.get(agentId)?.seq ?? (await this.#o.store.get(agentId))?.seq ?? 0;
    await this.#publish({ type: "disconnected", id: eventId(agentId, seq), agentId });
  }

  async #publish(event: ViewEvent): Promise<void> {
    try {
      await this.#o.broadcast.publish(VIEWS_CHANNEL, JSON.stringify(event));
    } catch (err) {
      // This replica's subscribers have it; the others read the store when they next subscribe.
      this.#o.log.warn({ err }, "cannot publish a cluster views event to the other replicas");
    }
  }

  current(agentId: string): Promise<AgentViews | undefined> {
    return this.#o.store.get(agentId);
  }

  list(): Promise<AgentViews[]> {
    return this.#o.store.list();
  }

  subscribe(
    filter: Filter,
    listener: (event: ViewEvent) => void,
    onDrop?: (reason: string) => void,
  ): () => void {
    const sub: Subscriber = { filter, listener, onDrop, pending: [], closed: false };
    this.#subs.add(sub);
    this.#o.metrics.subscribers.set(this.#subs.size);
    void this.#begin(sub).catch((err: unknown) => {
      this.#drop(sub, `cannot read the views: ${(err as Error).message}`);
    });
    return () => this.#remove(sub);
  }

  async #begin(sub: Subscriber): Promise<void> {
    const { agentId, lastEventId } = sub.filter;
    const resumed = agentId !== undefined && lastEventId !== undefined && this.#replay(agentId, lastEventId);
    let first: ViewEvent[];
    if (resumed) first = resumed;
    else {
      const states = agentId !== undefined ? [await this.current(agentId)] : await this.list();
      first = states.flatMap((s) =>
        s ? [{ type: "snapshot", id: eventId(s.agentId, s.seq), agent: s }] : [],
      );
    }
    if (sub.closed) return;
    const pending = sub.pending ?? [];
    sub.pending = undefined;
    const after = new Map(first.map((e) => [agentOf(e), seqOf(e)]));
    for (const e of first) this.#send(sub, e);
    for (const e of pending) {
      // What the snapshot already holds is not sent again.
      const seen = after.get(agentOf(e));
      if (e.type !== "connected" && e.type !== "disconnected" && seen !== undefined && seqOf(e) <= seen)
        continue;
      this.#send(sub, e);
    }
  }

  /** The events after `lastEventId` if this replica still has them all; undefined otherwise. */
  #replay(agentId: string, lastEventId: string): ViewEvent[] | undefined {
    const last = parseEventId(lastEventId);
    const known = this.#agents.get(agentId);
    if (!last || last.agentId !== agentId || !known) return undefined;
    if (last.seq === known.seq) return [];
    const oldest = known.history[0];
    if (!oldest || oldest.seq > last.seq || last.seq > known.seq) return undefined;
    const after = known.history.filter((h) => h.seq > last.seq);
    // None is a snapshot (see HistoryEntry); were one, a fresh snapshot would do instead.
    if (after.some((h) => h.json === undefined)) return undefined;
    // Each was parsed once already (parseEvent is deterministic): it parses the same again.
    return after.map((h) => parseEvent(h.json!)!);
  }

  /** An event heard from any replica (this one included), and its message. */
  #deliver(event: ViewEvent, json: string): void {
    const agentId = agentOf(event);
    const seq = seqOf(event);
    let known = this.#agents.get(agentId);
    if (!known) {
      known = { seq: 0, history: [] };
      this.#agents.set(agentId, known);
    }
    if ((event.type === "change" || event.type === "snapshot") && seq <= known.seq) {
      // Out of order (two replicas published close together): the store has the truth.
      void this.#resnapshot(agentId);
      return;
    }
    if (event.type === "change" || event.type === "snapshot") known.seq = seq;
    // A new array rather than a push onto an empty one: V8 would give that one room for 17.
    if (event.type === "snapshot") known.history = [{ seq }];
    else if (known.history.length === 0) known.history = [{ seq, json }];
    else known.history.push({ seq, json });
    if (known.history.length > this.#o.historyPerAgent) known.history.shift();
    this.#o.metrics.events.inc({ type: event.type });
    for (const sub of this.#subs) {
      if (sub.filter.agentId !== undefined && sub.filter.agentId !== agentId) continue;
      if (sub.pending) {
        if (sub.pending.length >= this.#o.maxPendingEvents)
          this.#drop(sub, "too many events while its snapshot was read");
        else sub.pending.push(event);
      } else this.#send(sub, event);
    }
  }

  async #resnapshot(agentId: string): Promise<void> {
    const state = await this.current(agentId).catch(() => undefined);
    if (!state) return;
    const known = this.#agents.get(agentId);
    if (known && state.seq < known.seq) return;
    const event: ViewEvent = { type: "snapshot", id: eventId(agentId, state.seq), agent: state };
    if (known) {
      known.seq = state.seq;
      known.history = [{ seq: state.seq }];
    }
    for (const sub of this.#subs) {
      if (sub.filter.agentId !== undefined && sub.filter.agentId !== agentId) continue;
      if (sub.pending) sub.pending.push(event);
      else this.#send(sub, event);
    }
  }

  #send(sub: Subscriber, event: ViewEvent): void {
    if (sub.closed) return;
    try {
      sub.listener(event);
    } catch (err) {
      this.#o.log.warn({ err }, "a cluster views subscriber failed; it is dropped");
      this.#drop(sub, `the subscriber failed: ${(err as Error).message}`);
    }
  }

  #remove(sub: Subscriber): void {
    if (sub.closed) return;
    sub.closed = true;
    this.#subs.delete(sub);
    this.#o.metrics.subscribers.set(this.#subs.size);
  }

  #drop(sub: Subscriber, reason: string): void {
    if (sub.closed) return;
    this.#remove(sub);
    this.#o.metrics.dropped.inc({ reason: reasonLabel(reason) });
    sub.onDrop?.(reason);
  }
}

/** A bounded label for a drop reason. */
function reasonLabel(reason: string): string {
  if (reason.startsWith("too many events")) return "backlog";
  if (reason.startsWith("cannot read")) return "store";
  if (reason.startsWith("the subscriber failed")) return "failed";
  return "shutdown";
}

/** An event as published by a replica (shared Redis: checked); undefined unless it is one. */
export function parseEvent(message: string): ViewEvent | undefined {
  const e = parseJsonObject(message);
  if (e === undefined) return undefined;
  const id = typeof e.id === "string" ? parseEventId(e.id) : undefined;
  if (!id) return undefined;
  const views = (x: unknown) => {
    const parsed = parseClusterViews(JSON.stringify(x ?? null));
    return "views" in parsed ? parsed.views : undefined;
  };
  const time = (x: unknown) => typeof x === "string" && x.length <= 64;
  switch (e.type) {
    case "connected":
    case "disconnected":
      return e.agentId === id.agentId ? { type: e.type, id: e.id as string, agentId: id.agentId } : undefined;
    case "change": {
      const v2 = views(e.views);
      if (e.agentId !== id.agentId || e.seq !== id.seq || !time(e.updatedAt) || !v2) return undefined;
      return {
        type: "change",
        id: e.id as string,
        agentId: id.agentId,
        seq: id.seq,
        updatedAt: e.updatedAt as string,
        views: v2,
      };
    }
    case "snapshot": {
      const a = e.agent as Record<string, unknown> | undefined;
      const v2 = views(a?.views);
      if (!a || a.agentId !== id.agentId || a.seq !== id.seq || !time(a.updatedAt) || !v2) return undefined;
      const agent: AgentViews = {
        agentId: id.agentId,
        connected: a.connected === true,
        seq: id.seq,
        updatedAt: a.updatedAt as string,
        views: v2,
      };
      return { type: "snapshot", id: e.id as string, agent };
    }
    default:
      return undefined;
  }
}
