import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { buildKasConfig, ConfigError, readKasSecrets } from "../../../cmd/kas/config/index.ts";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "kas-secrets-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function file(name: string, content: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, content);
  return path;
}

describe("readKasSecrets", () => {
  test("32 random bytes, base64 with a trailing newline (as GitLab writes .gitlab_kas_secret)", async () => {
    const bytes = randomBytes(32);
    const gitlab = await file("gitlab", `${bytes.toString("base64")}\n`);
    const priv = await file("private", randomBytes(32).toString("base64url"));
    const redis = await file("redis", "hunter2\n");
    const config = buildKasConfig(
      {
        gitlab: { address: "http://gitlab", authentication_secret_file: gitlab },
        private_api: { listen: { authentication_secret_file: priv } },
        redis: { password_file: redis },
      },
      {},
    );
    const secrets = await readKasSecrets(config);
    expect(Buffer.from(secrets.gitlabAuthSecret!)).toEqual(bytes);
    expect(secrets.privateApiSecret).toHaveLength(32);
    expect(secrets.redisPassword).toBe("hunter2");
    expect("apiSecret" in secrets).toBe(false);
  });

  test.each([
    ["16 bytes", () => randomBytes(16).toString("base64"), "expected 32 bytes base64-encoded, got 16 bytes"],
    [
      "not base64",
      () => "this is not base64!",
      "expected 32 bytes base64-encoded, found characters outside base64",
    ],
    ["nothing", () => "\n", "expected 32 bytes base64-encoded, the file is empty"],
  ])("a secret file holding %s is refused, naming the field and the file", async (name, content, message) => {
    const path = await file(`bad-${name}`, content());
    const config = buildKasConfig(
      { gitlab: { address: "http://gitlab", authentication_secret_file: path } },
      {},
    );
    const err = (await readKasSecrets(config).catch((e: unknown) => e)) as ConfigError;
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.message).toBe(`gitlab.authentication_secret_file: ${path}: ${message}`);
  });

  test("missing files: every one named", async () => {
    const config = buildKasConfig(
      {
        agent: { static_tokens_file: "/t" },
        api: { listen: { authentication_secret_file: join(dir, "nope1") } },
        redis: { password_file: join(dir, "nope2") },
      },
      {},
    );
    const err = (await readKasSecrets(config).catch((e: unknown) => e)) as ConfigError;
    expect(err.issues.map((i) => i.field)).toEqual([
      "api.listen.authentication_secret_file",
      "redis.password_file",
    ]);
    expect(err.message).toContain("ENOENT");
  });
});
