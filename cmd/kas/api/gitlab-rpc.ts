// The gRPC half of GitLab's API (8153): one grpc-js server, fed the HTTP/2 connections of the API
// port, GitLab's JWT checked on every call, with server reflection and the standard health service.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { ReflectionService } from "@grpc/reflection";
import { HealthImplementation, protoPath as healthProtoPath, type ServingStatus } from "grpc-health-check";
import { createGrpcStreamServer } from "../../../lib/tunnel/index.ts";
import type { GitLabRpc } from "../../../modules/runtime/index.ts";
import {
  type ConnectionLimits,
  closeHalfClosed,
  closeUnlessAuthenticated,
  DEFAULT_CONNECTION_LIMITS,
  type Http2Connections,
  limitReporter,
} from "../../../tool/http/serve/index.ts";
import type { Logger, ReadinessChecks, RequestMetrics } from "../../../tool/observability/index.ts";
import { ApiAuthError, createGitLabJwtVerifier } from "./gitlab-jwt.ts";

/** Anyone may ask whether kas serves (load balancers, Kubernetes' gRPC probes): no JWT. */
const HEALTH_SERVICE = "grpc.health.v1.Health";

export interface GitLabRpcServerOptions {
  /** Shared with GitLab (api.listen.authentication_secret_file). */
  secret: Uint8Array;
  /** kas's readiness is the health service's status. */
  readiness: ReadinessChecks;
  log: Logger;
  metrics?: RequestMetrics;
  /** How often health watchers hear of a readiness change. Default 5 s. */
  healthRefreshMs?: number;
  /**
   * Idle deadline (gRPC max_connection_idle), streams per connection, and the deadline for a
   * connection's first authenticated call. Default {@link DEFAULT_CONNECTION_LIMITS}.
   */
  limits?: ConnectionLimits;
  /** api.listen.max_connection_age, split as GitLab's kas does (see {@link grpcConnectionAge}). Default 2 h. */
  maxConnectionAgeMs?: number;
}

/** One HTTP/2 connection to the API, for the guard to tell it that a call on it was authenticated. */
interface ApiConnection {
  authenticated(): void;
}

/**
 * GitLab's kas split of `max_connection_age`: gRPC's own age (which adds +-10 % jitter) is 20 % of
 * it, the grace for calls in flight after GOAWAY 65 %, so a long call started late still ends
 * before a load balancer's limit of the whole age would cut it.
 */
export function grpcConnectionAge(maxConnectionAgeMs: number): { ageMs: number; graceMs: number } {
  return { ageMs: Math.round(maxConnectionAgeMs * 0.2), graceMs: Math.round(maxConnectionAgeMs * 0.65) };
}

export interface GitLabRpcServer extends GitLabRpc {
  /** The API port's HTTP/2 connections, for `listenHttp({http2})`. */
  readonly connections: Http2Connections;
  /** Once every module added its services: reflection over them, health watched. Idempotent. */
  start(): void;
  /** Health says NOT_SERVING from now on. */
  drain(): void;
}

/** `authorization: bearer <jwt>`, as Gitlab::Kas::Client sends it (the scheme in any case). */
export function bearerToken(metadata: grpc.Metadata): string | undefined {
  const [value] = metadata.get("authorization");
  const match = typeof value === "string" ? /^bearer\s+(\S+)\s*$/i.exec(value) : null;
  return match?.[1];
}

export function createGitLabRpcServer(options: GitLabRpcServerOptions): GitLabRpcServer {
  const { log, readiness } = options;
  const verify = createGitLabJwtVerifier(options.secret, {
    issuer: null,
    source: "authorization metadata (bearer)",
  });
  const services = new Map<string, string>(); // service name -> its .proto file
  const methods = new Set<string>();

  const guard = jwtGuard({
    verify,
    methods,
    log,
    metrics: options.metrics,
    // The connection has carried an authenticated call: the unauthenticated deadline is off.
    onAuthenticated: (metadata) => streams.peerOf({ metadata })?.authenticated(),
  });
  const limits = options.limits ?? DEFAULT_CONNECTION_LIMITS;
  const age = grpcConnectionAge(options.maxConnectionAgeMs ?? 2 * 60 * 60 * 1000);
  const server = new grpc.Server({
    interceptors: [guard],
    "grpc.max_connection_idle_ms": limits.idleTimeoutMs,
    "grpc.max_connection_age_ms": age.ageMs,
    "grpc.max_connection_age_grace_ms": age.graceMs,
    "grpc.max_concurrent_streams": limits.maxStreamsPerConnection,
    // GitLab's kas: pings every 50 s, below a load balancer's usual 60 s idle cut.
    "grpc.keepalive_time_ms": 50_000,
  });
  const streams = createGrpcStreamServer<ApiConnection>(server);
  const report = limitReporter("api", log, options.metrics);
  const addService: GitLabRpc["addService"] = (service, implementation, protoFile) => {
    const paths = Object.values(service).map((m) => m.path);
    const name = /^\/([^/]+)\//.exec(paths[0] ?? "")?.[1];
    if (!name) throw new Error("a gRPC service without methods");
    if (services.has(name)) throw new Error(`gRPC service ${name} added twice`);
    services.set(name, protoFile);
    for (const path of paths) methods.add(path);
    server.addService(service, implementation);
  };

  const health = new HealthImplementation({ "": "NOT_SERVING" });
  let draining = false;
  const setStatus = (next: ServingStatus) => {
    for (const name of ["", ...services.keys()]) health.setStatus(name, next);
  };
  /** Readiness, now: what Check answers and Watch streams. */
  const refresh = async () => {
    const ready = !draining && (await readiness.run()).ok;
    if (!draining) setStatus(ready ? "SERVING" : "NOT_SERVING");
  };
  let timer: NodeJS.Timeout | undefined;
  let started = false;

  return {
    addService,
    connections: {
      serve(socket) {
        closeHalfClosed(socket);
        streams.inject(socket, closeUnlessAuthenticated(socket, limits.unauthenticatedTimeoutMs, report));
      },
      async close(graceMs) {
        clearInterval(timer);
        await streams.close(graceMs);
      },
    },
    start() {
      if (started) return;
      started = true;
      // Check answers from readiness at the time of the call; Watch hears of changes within a refresh.
      health.addToServer({
        addService: (service, implementation) => {
          const original = implementation.check as grpc.handleUnaryCall<unknown, unknown>;
          const check: grpc.handleUnaryCall<unknown, unknown> = (call, callback) => {
            const answer = () => original(call, callback);
            refresh().then(answer, answer);
          };
          addService(service as grpc.ServiceDefinition, { ...implementation, check }, healthProtoPath);
        },
      });
      const definitions = protoLoader.loadSync([...new Set(services.values())], {
        includeDirs: [protoRoot()],
      });
      new ReflectionService(definitions).addToServer(server);
      void refresh().catch(() => {});
      timer = setInterval(() => void refresh().catch(() => {}), options.healthRefreshMs ?? 5_000);
      timer.unref();
    },
    drain() {
      draining = true;
      setStatus("NOT_SERVING");
    },
  };
}

/** GitLab's JWT before anything else runs (the health service excepted); the call's duration and status in the metrics. */
function jwtGuard(o: {
  verify: ReturnType<typeof createGitLabJwtVerifier>;
  /** The methods of the services added (any other is counted as "unknown"). */
  methods: ReadonlySet<string>;
  log: Logger;
  metrics: RequestMetrics | undefined;
  onAuthenticated(metadata: grpc.Metadata): void;
}): grpc.ServerInterceptor {
  return (method, call) => {
    const route = o.methods.has(method.path) ? method.path : "unknown";
    const end = o.metrics?.start(route);
    const healthCheck = method.path.startsWith(`/${HEALTH_SERVICE}/`);
    const guarded: grpc.ServerInterceptingCall = new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, nextMetadata) => {
            if (healthCheck) return nextMetadata(metadata);
            o.verify(bearerToken(metadata)).then(
              () => {
                o.onAuthenticated(metadata);
                nextMetadata(metadata);
              },
              (err: unknown) => {
                const details = err instanceof ApiAuthError ? err.message : "cannot check the JWT";
                o.log.info({ front: "api", route, reason: details }, "gRPC call refused");
                guarded.sendStatus({
                  code: grpc.status.UNAUTHENTICATED,
                  details,
                  metadata: new grpc.Metadata(),
                });
              },
            );
          },
        }),
      sendStatus: (status, nextStatus) => {
        end?.(grpc.status[status.code] ?? status.code);
        nextStatus(status);
      },
    });
    return guarded;
  };
}

/** The folder of the .proto files: proto/ beside cmd/ in the repository, or in the installed package. */
function protoRoot(): string {
  const candidates = ["../../../proto/", "../../../../proto/"].map((rel) =>
    fileURLToPath(new URL(rel, import.meta.url)),
  );
  const found = candidates.find((dir) => existsSync(`${dir}agent_tracker/v1/gitlab_rpc.proto`));
  if (!found) throw new Error(`the .proto files are missing (looked in ${candidates.join(", ")})`);
  return found;
}
