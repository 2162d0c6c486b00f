// One gRPC channel per Gitaly address, shared by every project on that server; a channel nobody
// has used for a while is closed (kas talks to a few Gitaly servers, each poll is short).
import { Channel, type ChannelCredentials } from "@grpc/grpc-js";
import { BlobServiceClient } from "../../../../proto/gen/gitaly/blob.ts";
import { CommitServiceClient } from "../../../../proto/gen/gitaly/commit.ts";
import { SmartHTTPServiceClient } from "../../../../proto/gen/gitaly/smarthttp.ts";
import { gitalyCredentials, parseGitalyAddress } from "./address.ts";

export interface GitalyClients {
  readonly blob: BlobServiceClient;
  readonly commit: CommitServiceClient;
  readonly smartHttp: SmartHTTPServiceClient;
}

export interface GitalyPoolOptions {
  /** Close a connection after this long without calls (ms). Default 5 minutes. */
  readonly idleTimeoutMs?: number;
  /** Extra CA certificate(s) for tls:// addresses, PEM or a file path; system roots always apply. */
  readonly extraCa?: string | Buffer;
}

interface Entry {
  readonly channel: Channel;
  readonly clients: GitalyClients;
  inFlight: number;
  idleTimer?: NodeJS.Timeout;
}

export class GitalyConnectionPool {
  readonly #entries = new Map<string, Entry>();
  readonly #idleTimeoutMs: number;
  readonly #extraCa: string | Buffer | undefined;
  #closed = false;

  constructor(options: GitalyPoolOptions = {}) {
    this.#idleTimeoutMs = options.idleTimeoutMs ?? 5 * 60_000;
    this.#extraCa = options.extraCa;
  }

  /** Open connections, by address. */
  get addresses(): string[] {
    return [...this.#entries.keys()];
  }

  /** Runs `fn` with the clients for `address`; the connection is not closed for idleness meanwhile. */
  async use<T>(address: string, fn: (clients: GitalyClients) => Promise<T>): Promise<T> {
    if (this.#closed) throw new Error("Gitaly connection pool is closed");
    const entry = this.#entry(address);
    clearTimeout(entry.idleTimer);
    entry.inFlight++;
    try {
      return await fn(entry.clients);
    } finally {
      entry.inFlight--;
      if (entry.inFlight === 0 && this.#entries.get(address) === entry) {
        entry.idleTimer = setTimeout(() => this.#closeEntry(address, entry), this.#idleTimeoutMs);
        entry.idleTimer.unref();
      }
    }
  }

  close(): void {
    this.#closed = true;
    for (const [address, entry] of this.#entries) this.#closeEntry(address, entry);
  }

  #entry(address: string): Entry {
    const existing = this.#entries.get(address);
    if (existing) return existing;
    const target = parseGitalyAddress(address);
    const creds: ChannelCredentials = gitalyCredentials(target, this.#extraCa);
    const channel = new Channel(target.target, creds, {});
    const options = { channelOverride: channel };
    const entry: Entry = {
      channel,
      clients: {
        blob: new BlobServiceClient(target.target, creds, options),
        commit: new CommitServiceClient(target.target, creds, options),
        smartHttp: new SmartHTTPServiceClient(target.target, creds, options),
      },
      inFlight: 0,
    };
    this.#entries.set(address, entry);
    return entry;
  }

  #closeEntry(address: string, entry: Entry): void {
    clearTimeout(entry.idleTimer);
    if (this.#entries.get(address) === entry) this.#entries.delete(address);
    entry.channel.close();
  }
}
