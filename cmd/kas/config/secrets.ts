import { readFile } from "node:fs/promises";
import { ConfigError, type ConfigIssue } from "../../../tool/config/errors.ts";
import type { KasConfig } from "./schema.ts";

/** The secrets the config points at, read and checked. Never log this object. */
export interface KasSecrets {
  /** Signs the Gitlab-Kas-Api-Request JWT (gitlab.authentication_secret_file). */
  gitlabAuthSecret?: Uint8Array;
  /** Verifies the JWTs GitLab presents to the API (api.listen.authentication_secret_file). */
  apiSecret?: Uint8Array;
  /** Signs and verifies kas-to-kas JWTs (private_api.listen.authentication_secret_file). */
  privateApiSecret?: Uint8Array;
  redisPassword?: string;
  /** The private API's certificate and key, PEM (private_api.listen.certificate_file, key_file). */
  privateApiTls?: { cert: string; key: string };
}

/** GitLab's secret files hold 32 random bytes, base64-encoded (as `gitlab-rake gitlab:kas:...` writes them). */
export const SECRET_BYTES = 32;

export async function readKasSecrets(config: KasConfig): Promise<KasSecrets> {
  const issues: ConfigIssue[] = [];
  const secret = async (field: string, path: string | undefined) => {
    if (path === undefined) return undefined;
    try {
      return decodeSecret(await readFile(path, "utf8"), path);
    } catch (err) {
      issues.push({ field, message: describe(err, path) });
      return undefined;
    }
  };
  const secrets: KasSecrets = {
    gitlabAuthSecret: await secret(
      "gitlab.authentication_secret_file",
      config.gitlab.authenticationSecretFile,
    ),
    apiSecret: await secret(
      "api.listen.authentication_secret_file",
      config.api.listen.authenticationSecretFile,
    ),
    privateApiSecret: await secret(
      "private_api.listen.authentication_secret_file",
      config.privateApi.listen.authenticationSecretFile,
    ),
  };
  /** A file read now, so that a missing or unreadable one is reported with its field before starting. */
  const text = async (field: string, path: string | undefined) => {
    if (path === undefined) return undefined;
    try {
      return (await readFile(path, "utf8")).trim();
    } catch (err) {
      issues.push({ field, message: describe(err, path) });
      return undefined;
    }
  };
  const { redis } = config;
  secrets.redisPassword = await text("redis.password_file", redis.passwordFile);
  const privateListen = config.privateApi.listen;
  const cert = await text("private_api.listen.certificate_file", privateListen.certificateFile);
  const key = await text("private_api.listen.key_file", privateListen.keyFile);
  if (cert !== undefined && key !== undefined) secrets.privateApiTls = { cert, key };
  // The files below are read where they are used (the CA at each dial to a peer, Redis's when it
  // connects); read here too, for a startup error that names the field.
  await text("private_api.listen.ca_certificate_file", privateListen.caCertificateFile);
  await text("redis.sentinel.sentinel_password_file", redis.sentinel.sentinelPasswordFile);
  if (redis.tls.enabled) {
    await text("redis.tls.ca_certificate_file", redis.tls.caCertificateFile);
    await text("redis.tls.certificate_file", redis.tls.certificateFile);
    await text("redis.tls.key_file", redis.tls.keyFile);
  }
  if (issues.length > 0) throw new ConfigError(issues);
  for (const key of Object.keys(secrets) as (keyof KasSecrets)[])
    if (secrets[key] === undefined) delete secrets[key];
  return secrets;
}

/** Base64 (standard or URL-safe, surrounding whitespace ignored) of exactly {@link SECRET_BYTES} bytes. */
export function decodeSecret(text: string, path: string): Uint8Array {
  const trimmed = text.trim();
  if (trimmed === "")
    throw new Error(`${path}: expected ${SECRET_BYTES} bytes base64-encoded, the file is empty`);
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)) {
    throw new Error(
      `${path}: expected ${SECRET_BYTES} bytes base64-encoded, found characters outside base64`,
    );
  }
  const bytes = Buffer.from(trimmed.replaceAll("-", "+").replaceAll("_", "/"), "base64");
  if (bytes.length !== SECRET_BYTES) {
    throw new Error(`${path}: expected ${SECRET_BYTES} bytes base64-encoded, got ${bytes.length} bytes`);
  }
  return new Uint8Array(bytes);
}

function describe(err: unknown, path: string): string {
  const code = (err as NodeJS.ErrnoException).code;
  return code ? `cannot read ${path}: ${code}` : (err as Error).message;
}
