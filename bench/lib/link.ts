// A network path modelled in userspace (this machine has no netem): TCP forwarders on loopback
// whose bytes, in each direction, wait in a bottleneck queue, leave it at the link's bandwidth and
// arrive a one-way delay later. Every connection forwarded by one link shares its two bottlenecks,
// as connections sharing a real path do.
//
// The queue is bounded (by default to the bandwidth-delay product). Loopback TCP cannot lose a
// packet, so a full queue pushes back instead of dropping: the forwarder stops reading the sender's
// socket until the queue has room, and the sender's kernel buffers and then its writes stall, as a
// TCP sender stalls once its congestion window is spent. What the model leaves out: loss, and the
// sender's congestion window itself (the hop to the queue is loopback, so a sender fills it at once).
import net from "node:net";

export interface LinkOptions {
  /** Round trip time added by the path (half each way), ms. */
  rttMs: number;
  /** Bottleneck bandwidth, each direction, bits per second. */
  bitsPerSecond: number;
  /** Bytes the bottleneck queue holds before it pushes back. Default: the bandwidth-delay product. */
  queueBytes?: number;
  /** Bytes written to a receiver and not yet taken by it before the link stops reading its sender. */
  receiverBuffer?: number;
}

export interface LinkStats {
  /** Bytes carried, each direction. */
  up: number;
  down: number;
  /** Times a sender was paused because the bottleneck queue was full. */
  queueFull: number;
}

/** Bytes in one read from a socket are at most this (Node's default readable highWaterMark). */
const MAX_READ = 64 * 1024;

/** One end's bytes toward the other: where they come from, where they go, why reading stopped. */
class Pipe {
  heldByQueue = false;
  heldByReceiver = false;
  constructor(
    readonly from: net.Socket,
    readonly to: net.Socket,
  ) {}

  update(): void {
    if (this.from.destroyed) return;
    if (this.heldByQueue || this.heldByReceiver) this.from.pause();
    else this.from.resume();
  }
}

interface InFlight {
  arrives: number;
  pipe: Pipe;
  /** null: the sender ended its side. */
  chunk: Buffer | null;
}

/** One direction of the path: a serializer at the link rate behind a bounded queue, then a delay. */
class Bottleneck {
  /** When the serializer will have sent every byte queued so far (ms, performance.now()). */
  #busyUntil = 0;
  readonly #bytesPerMs: number;
  readonly #delayMs: number;
  readonly #queueBytes: number;
  readonly #receiverBuffer: number;
  readonly #flight: InFlight[] = [];
  #head = 0;
  readonly #held: Pipe[] = [];
  #timer: NodeJS.Timeout | undefined;
  #timerAt = Number.POSITIVE_INFINITY;
  bytes = 0;
  queueFull = 0;

  constructor(bytesPerMs: number, delayMs: number, queueBytes: number, receiverBuffer: number) {
    this.#bytesPerMs = bytesPerMs;
    this.#delayMs = delayMs;
    this.#queueBytes = queueBytes;
    this.#receiverBuffer = receiverBuffer;
  }

  /** Bytes waiting for the serializer: its backlog in time, times the rate. */
  #queued(now: number): number {
    return Math.max(0, this.#busyUntil - now) * this.#bytesPerMs;
  }

  send(pipe: Pipe, chunk: Buffer | null): void {
    const now = performance.now();
    const start = Math.max(now, this.#busyUntil);
    const departs = chunk ? start + chunk.length / this.#bytesPerMs : start;
    this.#busyUntil = departs;
    if (chunk) this.bytes += chunk.length;
    this.#flight.push({ arrives: departs + this.#delayMs, pipe, chunk });
    // The chunk already read is queued (one read's overshoot); the sender waits for room.
    if (chunk && this.#queued(now) >= this.#queueBytes && !pipe.heldByQueue) {
      pipe.heldByQueue = true;
      pipe.update();
      this.#held.push(pipe);
      this.queueFull++;
    }
    this.#schedule(now);
  }

  /** When the queue will have room for another read. */
  #roomAt(): number {
    return this.#busyUntil - (this.#queueBytes - MAX_READ) / this.#bytesPerMs;
  }

  #schedule(now: number): void {
    let at = this.#head < this.#flight.length ? this.#flight[this.#head]!.arrives : Number.POSITIVE_INFINITY;
    if (this.#held.length > 0) at = Math.min(at, this.#roomAt());
    if (at === Number.POSITIVE_INFINITY || at >= this.#timerAt) return;
    clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(() => this.#tick(), Math.max(0, at - now));
  }

  #tick(): void {
    this.#timerAt = Number.POSITIVE_INFINITY;
    this.#timer = undefined;
    const now = performance.now();
    // Timers fire in whole milliseconds: what is due within half of one goes now.
    while (this.#head < this.#flight.length && this.#flight[this.#head]!.arrives <= now + 0.5) {
      const { pipe, chunk } = this.#flight[this.#head]!;
      this.#flight[this.#head++] = undefined as unknown as InFlight;
      this.#deliver(pipe, chunk);
    }
    if (this.#head > 1024 && this.#head * 2 > this.#flight.length) {
      this.#flight.splice(0, this.#head);
      this.#head = 0;
    }
    if (this.#held.length > 0 && this.#roomAt() <= now + 0.5) {
      for (const pipe of this.#held.splice(0)) {
        pipe.heldByQueue = false;
        pipe.update();
      }
    }
    this.#schedule(now);
  }

  #deliver(pipe: Pipe, chunk: Buffer | null): void {
    const to = pipe.to;
    if (to.destroyed) return;
    if (chunk === null) {
      to.end();
      return;
    }
    to.write(chunk);
    if (to.writableLength > this.#receiverBuffer && !pipe.heldByReceiver) {
      pipe.heldByReceiver = true;
      pipe.update();
      to.once("drain", () => {
        pipe.heldByReceiver = false;
        pipe.update();
      });
    }
  }

  close(): void {
    clearTimeout(this.#timer);
  }
}

export interface Link {
  /** Starts forwarding a loopback port through this link; resolves with the port to connect to. */
  forward(targetPort: number, targetHost?: string): Promise<number>;
  readonly stats: LinkStats;
  readonly options: Required<LinkOptions>;
  close(): Promise<void>;
}

/** The bandwidth-delay product, bytes. */
export function bdpBytes(o: { rttMs: number; bitsPerSecond: number }): number {
  return Math.round(((o.bitsPerSecond / 8) * o.rttMs) / 1000);
}

export function createLink(options: LinkOptions): Link {
  const o: Required<LinkOptions> = {
    queueBytes: Math.max(bdpBytes(options), 2 * MAX_READ),
    receiverBuffer: 4 * 1024 * 1024,
    ...options,
  };
  const bytesPerMs = o.bitsPerSecond / 8 / 1000;
  const up = new Bottleneck(bytesPerMs, o.rttMs / 2, o.queueBytes, o.receiverBuffer);
  const down = new Bottleneck(bytesPerMs, o.rttMs / 2, o.queueBytes, o.receiverBuffer);
  const servers: net.Server[] = [];
  const sockets = new Set<net.Socket>();

  const carry = (pipe: Pipe, way: Bottleneck) => {
    pipe.from.on("data", (chunk: Buffer) => way.send(pipe, chunk));
    pipe.from.on("end", () => way.send(pipe, null));
  };

  const connect = (client: net.Socket, port: number, host: string) => {
    const server = net.connect({ port, host, noDelay: true, allowHalfOpen: true });
    client.setNoDelay(true);
    for (const s of [client, server]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
    }
    // A reset on one side resets the other at once (a real path would carry the RST a delay later;
    // nothing measured depends on it).
    client.on("error", () => server.destroy());
    server.on("error", () => client.destroy());
    client.on("close", () => {
      if (!client.readableEnded) server.destroy();
    });
    server.on("close", () => {
      if (!server.readableEnded) client.destroy();
    });
    carry(new Pipe(client, server), up);
    carry(new Pipe(server, client), down);
  };

  return {
    options: o,
    get stats(): LinkStats {
      return { up: up.bytes, down: down.bytes, queueFull: up.queueFull + down.queueFull };
    },
    forward(targetPort, targetHost = "127.0.0.1") {
      const server = net.createServer({ allowHalfOpen: true }, (c) => connect(c, targetPort, targetHost));
      servers.push(server);
      return new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port));
      });
    },
    async close() {
      up.close();
      down.close();
      for (const s of sockets) s.destroy();
      await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
    },
  };
}
