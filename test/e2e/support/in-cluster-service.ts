// The in-cluster service agentk exposes in the end-to-end tests: `/metrics` answers at once,
// `/slow` streams a chunk every 100 ms until the test finishes it, keeping a digest of every byte
// it sent so the test can check the client received all of them, in order.
import { createHash, type Hash } from "node:crypto";
import { once } from "node:events";
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export const METRICS_BODY = "up 1\n";
const CHUNK = 16 * 1024;

/** One `/slow` response in progress. */
export interface SlowResponse {
  readonly sent: Hash;
  bytes: number;
  chunks: number;
  done: boolean;
  /** Sends the last chunk and ends the response. */
  finish(): void;
}

export class InClusterService {
  readonly #server: Server;
  /** Every `/slow` response started, in order. */
  readonly slow: SlowResponse[] = [];

  private constructor(server: Server) {
    this.#server = server;
  }

  static async start(): Promise<InClusterService> {
    const service: InClusterService = new InClusterService(
      createServer((req, res) => {
        if (req.url === "/slow") {
          service.slow.push(startSlow(res));
          return;
        }
        res.writeHead(200, { "content-type": "text/plain" });
        res.end(METRICS_BODY);
      }),
    );
    service.#server.listen(0, "127.0.0.1");
    await once(service.#server, "listening");
    return service;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  close(): void {
    for (const s of this.slow) s.finish();
    this.#server.close();
    this.#server.closeAllConnections();
  }
}

function startSlow(res: ServerResponse): SlowResponse {
  res.writeHead(200, { "content-type": "application/octet-stream" });
  let n = 0;
  const write = (end: boolean) => {
    const chunk = Buffer.alloc(CHUNK, n++ % 251);
    state.sent.update(chunk);
    state.bytes += chunk.length;
    state.chunks = n;
    if (end) res.end(chunk);
    else res.write(chunk);
  };
  const timer = setInterval(() => write(false), 100);
  const state: SlowResponse = {
    sent: createHash("sha256"),
    bytes: 0,
    chunks: 0,
    done: false,
    finish() {
      if (state.done) return;
      state.done = true;
      clearInterval(timer);
      write(true);
    },
  };
  write(false);
  return state;
}

/** A streamed response body being read: its bytes, counted and digested as they arrive. */
export interface BodyReader {
  readonly received: Hash;
  bytes: number;
  /** Resolves once the body has ended; rejects if it was cut. */
  readonly done: Promise<void>;
}

export function readBody(res: Response): BodyReader {
  const reader = res.body!.getReader();
  const state = { received: createHash("sha256"), bytes: 0 } as BodyReader & { done: Promise<void> };
  state.done = (async () => {
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      state.received.update(r.value);
      state.bytes += r.value.length;
    }
  })();
  state.done.catch(() => {}); // awaited by the test; a cut body must not count as unhandled meanwhile
  return state;
}
