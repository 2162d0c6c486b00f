// Pushes the views to kas over one `PushViews` stream at a time: once kas has answered the stream's
// headers (the stream is up), a snapshot of every enabled view, then the views that changed,
// coalesced: the first change after a quiet spell goes at once, the next ones at most every
// `minIntervalMs`, each view replaced whole, and only if its JSON differs from what this stream
// last carried. While the stream cannot take more (`write` false) changes only accumulate as
// dirty views: nothing queues. Every message takes a seq from the `SeqClock`.
import * as grpc from "@grpc/grpc-js";
import type {
  ClusterViewsServiceClient,
  PushViewsRequest,
} from "../../../proto/gen/cluster_views/v1/cluster_views.ts";
import type { Logger } from "../../../tool/observability/index.ts";
import { followStreams, HEALTHY_STREAM_MS, type StreamBackoff, waitForReady } from "../../runtime/index.ts";
import type { ClusterViews, ViewName } from "../views.ts";
import type { ClusterViewsAgentMetrics } from "./metrics.ts";

/**
 * A hybrid logical clock: max(previous + 1, unix ms × 1000). Increasing within a leader term, and a
 * later term (a restart, another replica) starts above an earlier one as long as their clocks
 * agree to within the lease handover (seconds), so kas orders updates across terms by seq alone.
 */
export class SeqClock {
  #last = 0;
  next(nowMs = Date.now()): number {
    this.#last = Math.max(this.#last + 1, nowMs * 1000);
    return this.#last;
  }
}

export interface PusherOptions {
  client: Pick<ClusterViewsServiceClient, "pushViews">;
  /** The enabled views. */
  views: readonly ViewName[];
  compute(name: ViewName): NonNullable<ClusterViews[ViewName]>;
  /** Resolves when the informers hold their first lists (no snapshot before). */
  synced: Promise<void>;
  clock: SeqClock;
  /** This term's id, sent for kas's logs. */
  epoch: string;
  minIntervalMs: number;
  backoff: StreamBackoff;
  log: Logger;
  metrics: ClusterViewsAgentMetrics;
}

export class ViewsPusher {
  readonly #o: PusherOptions;
  readonly #dirty = new Set<ViewName>();
  /** What the current stream last carried, per view (JSON). */
  readonly #sent = new Map<ViewName, string>();
  #call: grpc.ClientWritableStream<PushViewsRequest> | undefined;
  #blocked = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #lastFlush = 0;

  constructor(options: PusherOptions) {
    this.#o = options;
  }

  /** Views whose objects changed: sent soon, coalesced. */
  changed(names: readonly ViewName[]): void {
    for (const n of names) if (this.#o.views.includes(n)) this.#dirty.add(n);
    this.#schedule();
  }

  /** Streams until `signal` aborts, opening a new stream (with a snapshot) after each end. */
  async run(signal: AbortSignal): Promise<void> {
    await Promise.race([
      this.#o.synced,
      new Promise((r) => signal.addEventListener("abort", r, { once: true })),
    ]);
    // A stream that came up and lasted was healthy: the next one starts without backoff.
    await followStreams(signal, this.#o.backoff, async (s) => {
      const started = Date.now();
      const up = await this.#stream(s);
      return up && Date.now() - started > HEALTHY_STREAM_MS;
    });
  }

  /** One stream until it ends; resolves with whether it came up. */
  #stream(signal: AbortSignal): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      let up = false;
      const call = this.#o.client.pushViews(waitForReady(), (err) => {
        signal.removeEventListener("abort", cancel);
        if (this.#call === call) this.#call = undefined;
        clearTimeout(this.#timer);
        this.#timer = undefined;
        if (err && !signal.aborted && err.code !== grpc.status.CANCELLED) {
          this.#o.log.warn({ code: err.code, err: err.details }, "views stream ended");
        }
        resolve(up);
      });
      const cancel = () => call.cancel();
      signal.addEventListener("abort", cancel, { once: true });
      // kas answers the stream's headers at once: the stream is up, the snapshot goes now.
      call.once("metadata", () => {
        if (signal.aborted) return;
        up = true;
        this.#call = call;
        this.#blocked = false;
        this.#sent.clear();
        this.#dirty.clear();
        const views: ClusterViews = {};
        for (const name of this.#o.views) this.#record(views, name);
        this.#write(call, true, views);
        this.#o.log.info({ views: this.#o.views }, "views stream up; snapshot sent");
      });
    });
  }

  /** Computes `name` into `views`; returns whether it differs from what the stream last carried. */
  #record(views: ClusterViews, name: ViewName): boolean {
    const view = this.#o.compute(name);
    const json = JSON.stringify(view);
    if (this.#sent.get(name) === json) return false;
    this.#sent.set(name, json);
    (views as Record<ViewName, unknown>)[name] = view;
    return true;
  }

  #write(call: grpc.ClientWritableStream<PushViewsRequest>, snapshot: boolean, views: ClusterViews): void {
    const message: PushViewsRequest = {
      epoch: this.#o.epoch,
      seq: String(this.#o.clock.next()),
      snapshot,
      viewsJson: JSON.stringify(views),
    };
    this.#o.metrics.messages.inc({ kind: snapshot ? "snapshot" : "change" });
    this.#o.metrics.bytes.inc(message.viewsJson.length + message.epoch.length + 24);
    if (!call.write(message)) {
      this.#blocked = true;
      call.once("drain", () => {
        this.#blocked = false;
        this.#schedule();
      });
    }
  }

  #schedule(): void {
    if (this.#timer || !this.#call || this.#blocked || this.#dirty.size === 0) return;
    const wait = Math.max(0, this.#lastFlush + this.#o.minIntervalMs - Date.now());
    this.#timer = setTimeout(() => this.#flush(), wait);
  }

  #flush(): void {
    this.#timer = undefined;
    const call = this.#call;
    if (!call || this.#blocked) return;
    this.#lastFlush = Date.now();
    const views: ClusterViews = {};
    let any = false;
    for (const name of this.#dirty) any = this.#record(views, name) || any;
    this.#dirty.clear();
    if (any) this.#write(call, false, views);
  }

  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
