// Messages to every kas replica: Redis pub/sub when kas has Redis, the process itself otherwise.
import { randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";
import type { Redis } from "ioredis";
import type { Broadcast } from "../../../modules/runtime/index.ts";

/** Single-replica kas: the only subscribers are in this process. */
export class InProcessBroadcast implements Broadcast {
  readonly #events = new EventEmitter().setMaxListeners(0);

  async publish(channel: string, message: string): Promise<void> {
    // A subscriber that throws must not keep the message from the others.
    for (const listener of this.#events.listeners(channel)) {
      try {
        (listener as (m: string) => void)(message);
      } catch {
        // the subscriber's own failure: it logs what it must
      }
    }
  }

  subscribe(channel: string, onMessage: (message: string) => void): () => void {
    this.#events.on(channel, onMessage);
    return () => this.#events.off(channel, onMessage);
  }
}

/**
 * Redis pub/sub. `subscriber` is a connection of its own (a subscribed connection can do nothing
 * else), made with autoResubscribe off: channels are subscribed again on every 'ready', since a
 * SUBSCRIBE queued while Redis is down is dropped when the connection attempt fails. This
 * replica's subscribers hear a message at once, whether or not Redis is up; each message carries
 * its sender, so the sender ignores its own echo.
 */
export class RedisBroadcast implements Broadcast {
  readonly #local = new InProcessBroadcast();
  readonly #counts = new Map<string, number>();
  readonly #id = randomUUID();

  constructor(
    private readonly publisher: Redis,
    private readonly subscriber: Redis,
    /** Prepended to every channel, e.g. "gitlab-kas:broadcast:". */
    private readonly prefix: string,
  ) {
    subscriber.on("message", (channel: string, envelope: string) => {
      if (!channel.startsWith(prefix)) return;
      const separator = envelope.indexOf("\n");
      if (separator < 0 || envelope.slice(0, separator) === this.#id) return;
      void this.#local.publish(channel.slice(prefix.length), envelope.slice(separator + 1));
    });
    subscriber.on("ready", () => {
      const channels = [...this.#counts.keys()].map((c) => prefix + c);
      if (channels.length > 0) subscriber.subscribe(...channels).catch(() => {});
    });
  }

  /** Delivers here at once, then to the other replicas; rejects if Redis could not take it. */
  async publish(channel: string, message: string): Promise<void> {
    await this.#local.publish(channel, message);
    await this.publisher.publish(this.prefix + channel, `${this.#id}\n${message}`);
  }

  subscribe(channel: string, onMessage: (message: string) => void): () => void {
    const count = this.#counts.get(channel) ?? 0;
    this.#counts.set(channel, count + 1);
    if (count === 0 && this.subscriber.status === "ready") {
      this.subscriber.subscribe(this.prefix + channel).catch(() => {});
    }
    const off = this.#local.subscribe(channel, onMessage);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      off();
      const left = (this.#counts.get(channel) ?? 1) - 1;
      if (left > 0) this.#counts.set(channel, left);
      else {
        this.#counts.delete(channel);
        if (this.subscriber.status === "ready")
          this.subscriber.unsubscribe(this.prefix + channel).catch(() => {});
      }
    };
  }
}
