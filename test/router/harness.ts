import { randomBytes } from "node:crypto";
import type { Duplex } from "node:stream";
import { Router, type RouterOptions } from "../../lib/router/index.ts";
import { Kind, StreamDispatcher } from "../../lib/tunnel/header/index.ts";
import { serveTunnels, TunnelClient, type TunnelServer } from "../../lib/tunnel/session/index.ts";
import { HandshakeRejection } from "../../lib/tunnel/transport/index.ts";
import { readAll } from "../support/read-all.ts";
import type { RedisServer } from "../support/redis-server.ts";

export { readAll };

export const SECRET = randomBytes(32);
export const PREFIX = "test:router:";

/** Timings short enough for tests: a dead replica drops out within ~1 s. */
export const FAST = {
  livenessTtlMs: 1000,
  livenessRefreshMs: 250,
  agentTtlMs: 3000,
  agentRefreshMs: 1000,
  reconnectMaxDelayMs: 100,
} as const;

export interface Replica {
  name: string;
  router: Router;
  /** Where agents connect (the agent-facing listener of kas, reduced to registration). */
  agents: TunnelServer<string>;
  close(): Promise<void>;
}

export interface ReplicaOptions {
  /** Peer JWT settings over the shared test secret. */
  auth?: Partial<NonNullable<RouterOptions["privateApi"]>["auth"]>;
  /** Redis connection settings over `redis.connection` (password file, TLS, Sentinel). */
  redis?: Partial<NonNullable<RouterOptions["redis"]>>;
}

export async function startReplica(
  name: string,
  redis: RedisServer,
  options: ReplicaOptions = {},
): Promise<Replica> {
  const router = new Router({
    replicaId: name,
    privateApi: { host: "127.0.0.1", auth: { secret: SECRET, ...options.auth } },
    redis: { server: redis.connection, keyPrefix: PREFIX, ...FAST, ...options.redis },
    defaultTimeoutMs: 2000,
  });
  await router.start();
  const agents = await serveAgents(router);
  return {
    name,
    router,
    agents,
    async close() {
      await router.close(500);
      await agents.close(500);
    },
  };
}

/** The agent-facing listener of a kas, reduced to registration: the agent id comes in `x-agent-id`. */
export function serveAgents(router: Router): Promise<TunnelServer<string>> {
  return serveTunnels<string>({
    host: "127.0.0.1",
    authenticate: (req) => {
      const id = req.headers["x-agent-id"];
      if (typeof id !== "string") throw new HandshakeRejection(401, "x-agent-id required");
      return id;
    },
    onSession: (session) => router.register(session.identity, session),
  });
}

/**
 * An agent: every HTTP-kind stream is answered with "<agent id>\n" followed by an echo of what
 * it receives, so a response names the agent that served it.
 */
export function startAgent(
  replica: Pick<Replica, "agents">,
  agentId: string,
  onStream?: (stream: Duplex) => void,
): TunnelClient {
  const dispatcher = new StreamDispatcher();
  dispatcher.register(Kind.KIND_HTTP, (stream) => {
    stream.on("error", () => {});
    onStream?.(stream);
    stream.write(`${agentId}\n`);
    stream.pipe(stream);
  });
  const client = new TunnelClient({
    url: replica.agents.url,
    dial: { headers: { "x-agent-id": agentId } },
    backoff: { initialMs: 50, maxMs: 200 },
    onStream: (stream) => void dispatcher.handle(stream, undefined),
  });
  return client.start();
}

/** Sends `text` to the agent through `router`; resolves with the whole reply. */
export async function ask(router: Router, agentId: string, text = "ping", timeoutMs = 2000): Promise<string> {
  const stream = await router.dial(
    agentId,
    { kind: Kind.KIND_HTTP, service: "echo" },
    { deadline: Date.now() + timeoutMs },
  );
  stream.end(text);
  return (await readAll(stream)).toString();
}

/**
 * The next `event` from a registry. Not `events.once`: that rejects on the 'error' events a
 * registry emits while Redis is down, which are expected here.
 */
export function next<T extends unknown[]>(
  emitter: { once(event: string, listener: (...args: T) => void): unknown },
  event: string,
): Promise<T> {
  return new Promise((resolve) => emitter.once(event, (...args: T) => resolve(args)));
}

/** Retries `fn` until it resolves, for at most `ms`; returns its value and how long it took. */
export async function eventually<T>(
  fn: () => Promise<T>,
  ms: number,
): Promise<{ value: T; elapsedMs: number }> {
  const start = Date.now();
  let last: unknown;
  while (Date.now() - start < ms) {
    try {
      return { value: await fn(), elapsedMs: Date.now() - start };
    } catch (err) {
      last = err;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  throw new Error(`not within ${ms} ms: ${(last as Error)?.message}`, { cause: last });
}
