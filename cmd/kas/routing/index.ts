export {
  createKasRouter,
  type KasRouterOptions,
  REDIS_DOWN,
  redisConnection,
  toWebSocketUrl,
} from "./create-router.ts";
