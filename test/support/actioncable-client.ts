import WebSocket from "ws";
import { until, within } from "./until.ts";

/** Bound on the messages a test client keeps. */
const MAX_MESSAGES = 1000;

/**
 * A client of ActionCable's `actioncable-v1-json` protocol over `ws`: waits for the welcome,
 * subscribes to a channel, waits for the confirmation, then collects what the channel transmits.
 */
export class ActionCableClient {
  /** The `message` of each broadcast received, in order (bounded). */
  readonly messages: unknown[] = [];
  readonly #ws: WebSocket;
  readonly #frames: Array<{ type?: string; identifier?: string; message?: unknown }> = [];

  private constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.on("message", (data) => {
      const frame = JSON.parse(String(data)) as { type?: string; identifier?: string; message?: unknown };
      if (frame.type === "ping") return;
      if (this.#frames.length < MAX_MESSAGES) this.#frames.push(frame);
      if (frame.type === undefined && this.messages.length < MAX_MESSAGES) this.messages.push(frame.message);
    });
  }

  static async connect(url: string): Promise<ActionCableClient> {
    const ws = new WebSocket(url, ["actioncable-v1-json", "actioncable-unsupported"]);
    const client = new ActionCableClient(ws);
    await within(
      new Promise((resolve, reject) => {
        ws.once("open", resolve);
        ws.once("error", reject);
      }),
      10_000,
      "the ActionCable WebSocket to open",
    );
    if (ws.protocol !== "actioncable-v1-json") throw new Error(`subprotocol ${ws.protocol}`);
    await client.#frame((f) => f.type === "welcome", "welcome");
    return client;
  }

  /** Subscribes to `channel` with `params`; resolves once ActionCable confirms. */
  async subscribe(channel: string, params: Record<string, string>): Promise<void> {
    const identifier = JSON.stringify({ channel, ...params });
    this.#ws.send(JSON.stringify({ command: "subscribe", identifier }));
    await this.#frame(
      (f) =>
        f.identifier === identifier &&
        (f.type === "confirm_subscription" || f.type === "reject_subscription"),
      "confirm_subscription",
    );
    if (this.#frames.some((f) => f.identifier === identifier && f.type === "reject_subscription"))
      throw new Error(`subscription to ${identifier} rejected`);
  }

  /** Resolves with the first broadcast message that passes `test`, or rejects after `ms`. */
  async message<T>(test: (m: T) => boolean, ms: number, what: string): Promise<T> {
    let found: T | undefined;
    await until(
      () => {
        found = this.messages.find((m) => test(m as T)) as T | undefined;
        return found !== undefined;
      },
      ms,
      what,
    );
    return found as T;
  }

  close(): void {
    this.#ws.close();
  }

  #frame(test: (f: { type?: string; identifier?: string }) => boolean, what: string): Promise<void> {
    return until(() => this.#frames.some(test), 10_000, `ActionCable ${what}`);
  }
}
