import { once } from "node:events";
import { request } from "node:https";
import { connect as netConnect } from "node:net";
import type { Duplex } from "node:stream";
import { connect } from "node:tls";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import type { KubeApiServer } from "../../support/kube-apiserver.ts";

/**
 * The real client, configured for `server`. For a plain-http server (kas's Kubernetes API proxy
 * without TLS) skipTLSVerify is set: client-node refuses http:// without it.
 */
export function kubeClient(server: string, opts: { caCert?: string; token?: string } = {}) {
  const kc = new KubeConfig();
  const caData = opts.caCert && Buffer.from(opts.caCert).toString("base64");
  kc.loadFromOptions({
    clusters: [{ name: "c", server, ...(caData && { caData }), skipTLSVerify: server.startsWith("http:") }],
    users: [{ name: "u", ...(opts.token && { token: opts.token }) }],
    contexts: [{ name: "ctx", cluster: "c", user: "u" }],
    currentContext: "ctx",
  });
  return { kc, core: kc.makeApiClient(CoreV1Api) };
}

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTPS request to the test API server, as kubectl's raw mode would make it. */
export async function rawKubeRequest(
  api: KubeApiServer,
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<RawResponse> {
  const req = request(`${api.url}${path}`, {
    method: init.method ?? "GET",
    headers: init.headers,
    ca: api.caCert,
  });
  req.end(init.body);
  const [res] = await once(req, "response", { signal: AbortSignal.timeout(10_000) });
  let body = "";
  for await (const chunk of res) body += chunk;
  return { status: res.statusCode, headers: res.headers, body };
}

/** Collects everything a socket receives, so a test can wait for text without missing chunks. */
export class Received {
  #text = "";
  #waiters = new Set<() => void>();
  #ended = false;

  constructor(readonly socket: Duplex) {
    socket.on("data", (chunk: Buffer) => {
      this.#text += chunk.toString("latin1");
      for (const w of this.#waiters) w();
    });
    const end = () => {
      this.#ended = true;
      for (const w of this.#waiters) w();
    };
    socket.once("end", end);
    socket.once("close", end);
    socket.on("error", () => {});
  }

  get text(): string {
    return this.#text;
  }

  /** Resolves with everything received once it includes `text`; rejects if the socket ends first. */
  async until(text: string, timeoutMs = 10_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (!this.#text.includes(text)) {
      if (this.#ended)
        throw new Error(`socket ended before ${JSON.stringify(text)}; got ${JSON.stringify(this.#text)}`);
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(
          `no ${JSON.stringify(text)} within ${timeoutMs} ms; got ${JSON.stringify(this.#text)}`,
        );
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, left);
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.#waiters.add(done);
      }).finally(() => this.#waiters.clear());
    }
    return this.#text;
  }
}

/** Sends an Upgrade request (over TLS when `ca` is given) and waits for the response head. */
export async function rawUpgrade(
  target: { port: number; ca?: string },
  path: string,
  headers: Record<string, string>,
): Promise<{ socket: Duplex; received: Received; head: string }> {
  const socket = target.ca
    ? connect({ host: "127.0.0.1", port: target.port, ca: target.ca, servername: "localhost" })
    : netConnect({ host: "127.0.0.1", port: target.port });
  const received = new Received(socket);
  await once(socket, target.ca ? "secureConnect" : "connect", { signal: AbortSignal.timeout(10_000) });
  const lines = Object.entries({ host: "kube.test", connection: "Upgrade", ...headers }).map(
    ([k, v]) => `${k}: ${v}\r\n`,
  );
  socket.write(`GET ${path} HTTP/1.1\r\n${lines.join("")}\r\n`);
  const text = await received.until("\r\n\r\n");
  return { socket, received, head: text.slice(0, text.indexOf("\r\n\r\n")) };
}
