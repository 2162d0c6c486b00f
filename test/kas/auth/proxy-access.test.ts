// The Kubernetes API proxy's access as kas's configuration composes it: static dev tokens
// (answered by agent authentication, refusals keeping their HTTP status), each agent's own token,
// browsers from gitlab.external_url's origin only.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { AgentAuthError } from "../../../cmd/kas/auth/errors.ts";
import { agentTokenAccess, kubernetesProxyAccess } from "../../../cmd/kas/auth/proxy-access.ts";
import type { KasConfig } from "../../../cmd/kas/config/index.ts";
import { ProxyAccessError } from "../../../modules/kubernetes_api/kas/access.ts";

const NO_SIGNAL = new AbortController().signal;
const STATIC_TOKEN = "dev-token-static-Wq4zN7";
const OTHER_STATIC_TOKEN = "dev-token-static-Yk2mB9";

let dir: string;
let tokensFile: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "kas-proxy-access-"));
  tokensFile = join(dir, "tokens.yaml");
  await writeFile(
    tokensFile,
    `${STATIC_TOKEN}: {agentId: 1, projectId: 10, agentName: dev}\n${OTHER_STATIC_TOKEN}: {agentId: 2, projectId: 10, agentName: qa}\n`,
  );
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The settings read here, typed as the configuration has them (the rest is not read). */
const config = (raw: { gitlab?: Partial<KasConfig["gitlab"]>; agent?: Partial<KasConfig["agent"]> }) =>
  ({ gitlab: { ...raw.gitlab }, agent: { infoCacheMaxEntries: 10_000, ...raw.agent } }) as KasConfig;

describe("agentTokenAccess", () => {
  const agent = { agentId: "1", projectId: "10", agentName: "dev" };

  test("a known token: its agent", async () => {
    const access = agentTokenAccess({ authenticateAgent: async () => agent });
    await expect(access("t", NO_SIGNAL)).resolves.toEqual(agent);
  });

  test("the caller's signal reaches the authenticator", async () => {
    const seen: (AbortSignal | undefined)[] = [];
    const access = agentTokenAccess({
      authenticateAgent: async (_token, options) => {
        seen.push(options?.signal);
        return agent;
      },
    });
    const signal = new AbortController().signal;
    await access("t", signal);
    expect(seen).toEqual([signal]);
  });

  test.each([
    ["unauthenticated", 401],
    ["permission_denied", 403],
    ["not_found", 404],
    ["unavailable", 503],
  ] as const)("a refusal (%s) keeps its HTTP status and message", async (code, status) => {
    const access = agentTokenAccess({
      authenticateAgent: () => Promise.reject(new AgentAuthError(code, `refused: ${code}`)),
    });
    const err = await access("t", NO_SIGNAL).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProxyAccessError);
    expect(err).toMatchObject({ status, message: `refused: ${code}` });
  });

  test("any other failure is a 503 that does not pass on what failed", async () => {
    const access = agentTokenAccess({
      authenticateAgent: () => Promise.reject(new Error("secret internals")),
    });
    const err = await access("t", NO_SIGNAL).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProxyAccessError);
    expect(err).toMatchObject({ status: 503, message: "cannot authenticate the request now" });
  });
});

describe("kubernetesProxyAccess", () => {
  test("GitLab only: no static tokens, no browsers; the bound on GitLab's cached answers", async () => {
    const access = await kubernetesProxyAccess(
      config({ gitlab: { address: "http://127.0.0.1:1/" }, agent: { infoCacheMaxEntries: 7 } }),
    );
    expect(access).toEqual({ gitlabAnswersMaxEntries: 7 });
  });

  test("static tokens: the token's agent, and each agent's own token", async () => {
    const access = await kubernetesProxyAccess(config({ agent: { staticTokensFile: tokensFile } }));
    await expect(access.agentToken!(STATIC_TOKEN, NO_SIGNAL)).resolves.toMatchObject({ agentId: "1" });
    await expect(access.agentToken!("nope", NO_SIGNAL)).rejects.toMatchObject({ status: 401 });
    await expect(access.staticTokenOf!("2")).resolves.toBe(OTHER_STATIC_TOKEN);
    await expect(access.staticTokenOf!("3")).resolves.toBeUndefined();
    expect(access.cors).toBeUndefined();
  });

  test("gitlab.external_url: browsers from its origin only", async () => {
    const access = await kubernetesProxyAccess(
      config({ gitlab: { externalUrl: "https://gitlab.example.com:8443/some/path" } }),
    );
    expect(access.cors).toEqual({ allowedOrigins: ["https://gitlab.example.com:8443"] });
    expect(access.agentToken).toBeUndefined();
  });
});
