import { randomBytes } from "node:crypto";
import { createLogger, type Logger } from "../../../cmd/kas/observability/index.ts";
import { GitLabApiServer, type TestAgent } from "../../support/gitlab-api.ts";

export const TOKEN = "glagent-Qx7vK2mN9pL4sT8wR1yZ3bC6";
export const AGENT: TestAgent = { agentId: 42, projectId: 7, agentName: "prod-cluster" };

export async function startGitLab(
  agents: Record<string, TestAgent> = { [TOKEN]: AGENT },
  pathPrefix?: string,
) {
  const secret = new Uint8Array(randomBytes(32));
  const api = await GitLabApiServer.start({
    secret,
    agents,
    ...(pathPrefix !== undefined && { pathPrefix }),
  });
  return { api, secret };
}

/** A logger writing into memory, to assert on what reaches the logs. */
export function memoryLogger(): { log: Logger; text: () => string } {
  const lines: string[] = [];
  const log = createLogger({
    level: "trace",
    destination: { write: (line: string) => void lines.push(line) },
  });
  return { log, text: () => lines.join("") };
}

/** A clock the test moves by hand (caches take it as `now`). */
export function fakeClock(start = 1_000_000) {
  let now = start;
  return {
    now: () => now,
    advance: (ms: number) => {
      now += ms;
    },
  };
}
