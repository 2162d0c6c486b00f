export { createKasRouter, type KasRouterOptions, toWebSocketUrl } from "./create-router.ts";
