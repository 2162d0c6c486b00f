// Cluster view events into GitLab's ActionCable, as Rails' own `ActionCable.server.broadcast` puts
// them there: its Redis subscription adapter (actioncable 6.1, subscription_adapter/redis.rb and
// channel_prefix.rb) PUBLISHes the JSON-encoded message to the channel
// `[channel_prefix, broadcasting].compact.join(":")`; a channel that does
// `stream_from "cluster_agent:#{id}"` decodes it and transmits it to its subscribers.
import { createHash } from "node:crypto";
import type { Counter } from "prom-client";
import type { ViewEvent, ViewsHub } from "../views.ts";

/** The ActionCable broadcasting of an agent's view events (what a Rails channel streams from). */
export function clusterAgentBroadcasting(agentId: string): string {
  return `cluster_agent:${agentId}`;
}

/** The Redis channel of a broadcasting: ActionCable's `channel_with_prefix` (no prefix: the name alone). */
export function actionCableChannel(broadcasting: string, channelPrefix?: string): string {
  return channelPrefix === undefined ? broadcasting : `${channelPrefix}:${broadcasting}`;
}

export function agentIdOf(event: ViewEvent): string {
  return event.type === "snapshot" ? event.agent.agentId : event.agentId;
}

export interface ActionCableBroadcasterOptions {
  hub: ViewsHub;
  /** A Redis connection to ActionCable's Redis (ioredis' `publish`). */
  publisher: { publish(channel: string, message: string): Promise<unknown> };
  channelPrefix?: string;
  /** Broadcasts in flight at most; beyond, events are dropped (counted as `dropped`). */
  maxPending: number;
  /**
   * With several kas replicas every replica hears every event: `claim(key)` resolves true for the
   * one replica that should broadcast it (Redis SET NX). Absent: this replica broadcasts everything.
   */
  claim?: (key: string) => Promise<boolean>;
  /** kas_cluster_views_actioncable_broadcasts_total{result}. */
  results: Counter<"result">;
  log: { warn(obj: object, msg: string): void };
  /** After the hub dropped this subscriber (a backlog, a store failure), follow again after this long. Default 1 s. */
  resubscribeMs?: number;
}

/** Follows every agent's view events and broadcasts each into ActionCable, bounded. */
export class ActionCableBroadcaster {
  readonly #o: ActionCableBroadcasterOptions;
  readonly #pending = new Set<Promise<void>>();
  #unsubscribe: (() => void) | undefined;
  #closed = false;
  #resubscribe: NodeJS.Timeout | undefined;
  /** Whether the last broadcast failed: one warning per outage, not one per event. */
  #failing = false;

  constructor(options: ActionCableBroadcasterOptions) {
    this.#o = options;
  }

  start(): void {
    if (this.#closed || this.#unsubscribe) return;
    this.#unsubscribe = this.#o.hub.subscribe(
      {},
      (event) => this.#broadcast(event),
      (reason) => {
        this.#unsubscribe = undefined;
        if (this.#closed) return;
        // What was missed comes back as a snapshot of each agent when following again.
        this.#o.log.warn({ reason }, "the views hub dropped ActionCable's subscription: following again");
        this.#resubscribe = setTimeout(() => this.start(), this.#o.resubscribeMs ?? 1000);
        this.#resubscribe.unref();
      },
    );
  }

  /** Follows no more events (kas is draining); broadcasts in flight go on. */
  stop(): void {
    this.#closed = true;
    clearTimeout(this.#resubscribe);
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
  }

  /** Broadcasts in flight right now. */
  get pending(): number {
    return this.#pending.size;
  }

  /** Stops following events; broadcasts in flight get `graceMs` to finish. */
  async close(graceMs: number): Promise<void> {
    this.stop();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(this.#pending),
      new Promise((resolve) => {
        timer = setTimeout(resolve, graceMs);
      }),
    ]);
    clearTimeout(timer);
  }

  #broadcast(event: ViewEvent): void {
    const { results } = this.#o;
    if (this.#pending.size >= this.#o.maxPending) {
      results.inc({ result: "dropped" });
      return;
    }
    const agentId = agentIdOf(event);
    const channel = actionCableChannel(clusterAgentBroadcasting(agentId), this.#o.channelPrefix);
    const message = JSON.stringify(event);
    // Every replica hears the same event with the same content: its digest names it (an id alone
    // may repeat, e.g. after an agent restarts its sequence).
    const key = createHash("sha256").update(channel).update("\n").update(message).digest("base64url");
    const done = this.#send(key, channel, message).then(
      (result) => {
        results.inc({ result });
        this.#failing = false;
      },
      (err: Error) => {
        results.inc({ result: "failed" });
        if (!this.#failing) this.#o.log.warn({ err: err.message, channel }, "ActionCable broadcast failed");
        this.#failing = true;
      },
    );
    this.#pending.add(done);
    void done.finally(() => this.#pending.delete(done));
  }

  async #send(key: string, channel: string, message: string): Promise<"published" | "elsewhere"> {
    if (this.#o.claim && !(await this.#o.claim(key))) return "elsewhere";
    await this.#o.publisher.publish(channel, message);
    return "published";
  }
}
