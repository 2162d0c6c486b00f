import { randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { SignJWT } from "jose";
import { buildKasConfig, type KasConfig } from "../../../cmd/kas/config/index.ts";
import { createLogger, type Logger } from "../../../cmd/kas/observability/index.ts";

export const TOKEN = "dev-token-for-agent-42";
export const OTHER_TOKEN = "dev-token-for-agent-43";
export const THIRD_TOKEN = "dev-token-for-agent-44";
export const AGENT_ID = "42";

/** A static tokens file (agents 42, 43, 44; projects 7, 8, 8) and the two secrets, in `dir`. */
export async function writeFixtures(dir: string) {
  const tokensFile = join(dir, "tokens.yaml");
  await writeFile(
    tokensFile,
    `${TOKEN}: {agentId: 42, projectId: 7, agentName: prod}\n${OTHER_TOKEN}: {agentId: 43, projectId: 8, agentName: staging}\n${THIRD_TOKEN}: {agentId: 44, projectId: 8, agentName: qa}\n`,
  );
  const apiSecret = new Uint8Array(randomBytes(32));
  const apiSecretFile = join(dir, "api_secret");
  await writeFile(apiSecretFile, Buffer.from(apiSecret).toString("base64"));
  const privateSecretFile = join(dir, "private_secret");
  await writeFile(privateSecretFile, randomBytes(32).toString("base64"));
  return { tokensFile, apiSecret, apiSecretFile, privateSecretFile };
}

/** The JWT GitLab sends in Gitlab-Kas-Api-Request (iss gitlab, aud gitlab-kas). */
export function gitlabJwt(secret: Uint8Array, claims: { iss?: string; aud?: string } = {}): Promise<string> {
  return new SignJWT({})
    .setProtectedHeader({ alg: "HS256" })
    .setIssuer(claims.iss ?? "gitlab")
    .setAudience(claims.aud ?? "gitlab-kas")
    .setIssuedAt()
    .setExpirationTime("60s")
    .sign(secret);
}

/** A configuration with every listener on an ephemeral loopback port (port 0; kas reports where each ended up). */
export function inProcessConfig(document: Record<string, unknown>): KasConfig {
  const config = buildKasConfig(document, {});
  const any = { host: "127.0.0.1", port: 0 };
  config.agent.listen.address = any;
  config.observability.listen.address = any;
  config.api.listen.address = any;
  config.agent.kubernetesApi.listen.address = any;
  // Plain HTTP unless a test gives a certificate (none is made under the home directory).
  config.agent.kubernetesApi.listen.plaintext = true;
  config.privateApi.listen.address = any;
  // In-process tests stop kas themselves, with no load balancer to wait for.
  config.shutdownDrainDelayMs = 0;
  return config;
}

export function silentLogger(): Logger {
  return createLogger({ level: "silent" });
}
