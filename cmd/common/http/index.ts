// What every HTTP front of both daemons shares: the guard that turns any failure into an answer, safe path parsing.
export {
  type ErrorAnswer,
  type ErrorRenderer,
  type GuardedHandlers,
  type GuardLog,
  type GuardOptions,
  guardRequests,
  guardServer,
  guardUpgrades,
  jsonError,
  type RequestHandler,
  sendBody,
  type UpgradeHandler,
} from "./guard.ts";
export { HttpError } from "./http-error.ts";
export { type Body, rawAnswer } from "./raw-answer.ts";
export { decodePathSegment, type RequestTarget, requestTarget } from "./request-target.ts";
