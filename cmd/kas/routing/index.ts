export { createKasRouter, type KasRouterOptions, redisConnection, toWebSocketUrl } from "./create-router.ts";
