import { describe, expect, test } from "vitest";
import { AgentToken } from "../../../cmd/kas/auth/index.ts";
import { createLogger } from "../../../cmd/kas/observability/index.ts";
import { signKasApiJwt } from "../../../tool/gitlab/kas-jwt.ts";

const TOKEN = "glagent-Zr8kWq2vNc5xLp0sYt7uBe4h";
const GITALY_TOKEN = "gitaly-very-secret-value";

function capture(level: "info" | "trace" = "trace") {
  const lines: string[] = [];
  const log = createLogger({ level, name: "kas", destination: { write: (l: string) => void lines.push(l) } });
  return { log, lines, text: () => lines.join("") };
}

describe("logger redaction", () => {
  test("credentials by field name: headers, token fields at any depth, secrets, passwords", () => {
    const { log, text, lines } = capture();
    log.info(
      {
        headers: { authorization: `Bearer ${TOKEN}`, "gitlab-kas-api-request": "x.y.z" },
        req: { headers: { authorization: TOKEN } },
        token: TOKEN,
        agent: { token: TOKEN, gitalyInfo: { token: GITALY_TOKEN } },
        secret: "s3cr3t-value",
        redis: { password: "hunter2-value" },
      },
      "request",
    );
    expect(text()).not.toContain(TOKEN);
    expect(text()).not.toContain(GITALY_TOKEN);
    expect(text()).not.toContain("s3cr3t-value");
    expect(text()).not.toContain("hunter2-value");
    expect(text()).not.toContain("x.y.z");
    const line = JSON.parse(lines[0]!);
    expect(line.headers.authorization).toBe("[REDACTED]");
    expect(line.agent.gitalyInfo.token).toBe("[REDACTED]");
    expect(line.name).toBe("kas");
  });

  test("credentials by shape inside any string: JWTs, bearer values, GitLab tokens", async () => {
    const { log, text } = capture();
    const jwt = await signKasApiJwt(new Uint8Array(32).fill(7));
    log.info(
      { note: `header was ${jwt}`, list: [`Bearer ${TOKEN}`] },
      `sending Authorization: Bearer ${TOKEN}`,
    );
    log.warn("format %s and %s", jwt, TOKEN);
    log.info(`url https://gitlab/?private_token=${TOKEN}`);
    expect(text()).not.toContain(jwt);
    expect(text()).not.toContain(jwt.split(".")[1]);
    expect(text()).not.toContain(TOKEN);
    expect(text()).toContain("Bearer [REDACTED]");
  });

  test("the Token scheme is scrubbed, the word token in a message is not", () => {
    const { log, text } = capture();
    log.info("Authorization: Token abc123def456 sent");
    log.info("agent token is invalid or revoked; agent token no longer valid");
    expect(text()).not.toContain("abc123def456");
    expect(text()).toContain("Token [REDACTED] sent");
    expect(text()).toContain("agent token is invalid or revoked; agent token no longer valid");
  });

  test("errors: message, stack and cause are scrubbed, whether logged as {err} or directly", () => {
    const { log, text, lines } = capture();
    const cause = new Error(`inner ${TOKEN}`);
    log.error({ err: new Error(`outer Bearer ${TOKEN}`, { cause }) }, "failed");
    log.warn(new Error(`direct ${TOKEN}`));
    expect(text()).not.toContain(TOKEN);
    const first = JSON.parse(lines[0]!);
    expect(first.err.type).toBe("Error");
    expect(first.err.message).toBe("outer Bearer [REDACTED]");
    expect(first.err.cause.message).toBe("inner [REDACTED]");
    expect(JSON.parse(lines[1]!).msg).toBe("direct [REDACTED]");
  });

  test("child loggers' bindings and AgentToken objects never show the token", () => {
    const { log, text } = capture();
    const child = log.child({ auth: `Bearer ${TOKEN}`, agentToken: new AgentToken(TOKEN) });
    child.info({ identity: { agentId: "1", token: new AgentToken(TOKEN) } }, "tunnel up");
    expect(text()).not.toContain(TOKEN);
    expect(text()).toContain("tunnel up");
  });

  test("the level filters (a debug line does not appear at info)", () => {
    const { log, lines } = capture("info");
    log.debug("hidden");
    log.info("shown");
    expect(lines.map((l) => JSON.parse(l).msg)).toEqual(["shown"]);
  });
});
