// The tunnel library: one WebSocket, a yamux multiplexer over it, typed stream headers, the
// sessions and reconnecting client built from them, and gRPC / HTTP adapters on top.
// Knows nothing of GitLab, Kubernetes or Redis. Inside this repository, import this file; the npm
// package (packages/tunnel) offers the same as two entries: `core.ts` and `grpc/index.ts`.
export * from "./core.ts";
export * from "./grpc/index.ts";
