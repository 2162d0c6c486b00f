import { type DestinationStream, type Logger, pino } from "pino";
import type { LogLevel } from "../config/values.ts";
import { LogLimiter, type LogLimits } from "./log-limiter.ts";
import { REDACT_PATHS, REDACTED, scrubString, scrubValue } from "./redact.ts";

export type { Logger } from "pino";

export interface LoggerOptions {
  /** Default "info". */
  level?: LogLevel;
  /** Shown as `name` on every line, e.g. "kas" or "agentk". */
  name?: string;
  /** Default stdout. Tests pass a stream to read the lines back. */
  destination?: DestinationStream;
  /** Fields on every line. */
  base?: Record<string, unknown>;
  /** How many lines of one kind (level and message) per window; `false`: no limit. Default {@link LogLimiter}'s. */
  limits?: LogLimits | false;
}

/**
 * JSON lines (pino). Credentials never get through: known fields are censored by name and every
 * string is scrubbed of JWTs, bearer values and GitLab tokens, messages and errors included.
 */
export function createLogger(options: LoggerOptions = {}): Logger {
  const limiter = options.limits === false ? undefined : new LogLimiter(options.limits);
  const logger = pino(
    {
      level: options.level ?? "info",
      ...(options.name !== undefined && { name: options.name }),
      ...(options.base !== undefined && { base: options.base }),
      redact: { paths: [...REDACT_PATHS], censor: REDACTED },
      // scrubValue turns errors into plain scrubbed objects, so pino's err serializer has nothing left to do.
      formatters: {
        log: (obj) => scrubValue(obj) as Record<string, unknown>,
      },
      serializers: { err: (err: unknown) => err },
      hooks: {
        logMethod(args, method, level) {
          // log.warn(err) would take err.message as the message unscrubbed: make it log.warn({err}, message).
          const [first, ...rest] = args as unknown[];
          const normalized =
            first instanceof Error ? [{ err: first }, ...(rest.length > 0 ? rest : [first.message])] : args;
          const scrubbed = normalized.map((a) => (typeof a === "string" ? scrubString(a) : a));
          // The message template (never the fields) names the kind of line.
          const message = typeof scrubbed[0] === "string" ? scrubbed[0] : scrubbed[1];
          const summarize = (suppressed: number, similar: string) =>
            method.call(this, { suppressed, similar }, `suppressed ${suppressed} similar lines`);
          if (limiter && !limiter.admit(level, typeof message === "string" ? message : "", summarize)) return;
          method.apply(this, scrubbed as Parameters<typeof method>);
        },
      },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.destination ?? pino.destination({ dest: 1, sync: false }),
  );
  // pino applies no formatter to a child's bindings; children inherit this `child` through their prototype.
  const child = logger.child;
  logger.child = function (this: Logger, bindings, childOptions) {
    return child.call(this, scrubValue(bindings) as typeof bindings, childOptions);
  } as typeof child;
  return logger;
}
