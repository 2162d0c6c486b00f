import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  type AgentkConfig,
  agentkFlags,
  agentkHelp,
  type LoadAgentkConfigOptions,
  loadAgentkConfig,
} from "../../../cmd/agentk/config/index.ts";
import { ConfigError } from "../../../cmd/kas/config/index.ts";
import { flagNameOf } from "../../../tool/config/flags.ts";
import { settingLeaves } from "../../../tool/config/settings.ts";

const TOKEN = "glagent-Yh3nQ8vL2kS9wE5rT1uI7oP0";
let dir: string;
let tokenFile: string;
let caFile: string;
let noServiceAccount: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "agentk-config-"));
  tokenFile = join(dir, "token");
  await writeFile(tokenFile, `${TOKEN}\n`);
  caFile = join(dir, "ca.pem");
  await writeFile(caFile, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
  noServiceAccount = join(dir, "no-service-account");
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const BASE = ["--kas-address", "wss://kas.example.com", "--token-file"];

async function load(
  argv: string[],
  env: NodeJS.ProcessEnv = {},
  extra: Partial<LoadAgentkConfigOptions> = {},
) {
  const result = await loadAgentkConfig({ argv, env, serviceAccountDir: noServiceAccount, ...extra });
  if (result.help) throw new Error("unexpected help");
  return result.config;
}

async function issues(argv: string[], env: NodeJS.ProcessEnv = {}): Promise<string[]> {
  const err = await loadAgentkConfig({ argv, env, serviceAccountDir: noServiceAccount }).then(
    () => {
      throw new Error("expected a ConfigError");
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  expect((err as Error).message).not.toContain(TOKEN);
  return (err as Error).message.split("\n");
}

describe("agentk configuration", () => {
  test("minimal: kas address and token file; defaults for the rest", async () => {
    const config = await load([...BASE, tokenFile]);
    expect(config).toEqual<AgentkConfig>({
      kasAddress: "wss://kas.example.com/",
      token: config.token,
      kasHeaders: {},
      kasInsecureSkipTlsVerify: false,
      keepAliveIntervalMs: 55_000,
      pod: {},
      kubernetes: { kind: "none" },
      services: [],
      observability: { listen: { host: undefined, port: 8080 } },
      logLevel: "info",
    });
    expect(config.token.reveal()).toBe(TOKEN);
    expect(JSON.stringify(config)).not.toContain(TOKEN);
    // Absent, not undefined: the TLS options are built from what is there.
    expect(Object.keys(config)).not.toContain("caCertFile");
    expect(Object.keys(config)).not.toContain("kasTlsServerName");
  });

  test("every flag", async () => {
    const kubeconfig = join(dir, "kubeconfig");
    await writeFile(kubeconfig, "apiVersion: v1\nkind: Config\n");
    const servicesFile = join(dir, "services.yaml");
    await writeFile(servicesFile, "services:\n  grafana: http://grafana.monitoring.svc:3000\n");
    const config = await load(
      [
        ...BASE,
        tokenFile,
        "--ca-cert-file",
        caFile,
        "--kas-header",
        "X-Tenant: blue",
        "--kas-header",
        "Cookie: a=b; c=d",
        "--kas-insecure-skip-tls-verify",
        "--kas-tls-server-name",
        "kas.internal",
        "--keepalive-interval",
        "20s",
        "--kubeconfig",
        kubeconfig,
        "--service",
        "prometheus=http://prometheus.monitoring.svc:9090",
        "--service",
        "api=https://api.default.svc/",
        "--services-file",
        servicesFile,
        "--observability-listen-address",
        "127.0.0.1:18080",
        "--log-level",
        "debug",
      ],
      { POD_NAME: "agentk-7d9f-abcde", POD_NAMESPACE: "gitlab-agent" },
    );
    expect(config).toMatchObject({
      caCertFile: caFile,
      kasHeaders: { "X-Tenant": "blue", Cookie: "a=b; c=d" },
      kasInsecureSkipTlsVerify: true,
      kasTlsServerName: "kas.internal",
      keepAliveIntervalMs: 20_000,
      pod: { name: "agentk-7d9f-abcde", namespace: "gitlab-agent" },
      kubernetes: { kind: "kubeconfig", paths: [kubeconfig] },
      services: [
        { name: "prometheus", url: "http://prometheus.monitoring.svc:9090/" },
        { name: "api", url: "https://api.default.svc/" },
        { name: "grafana", url: "http://grafana.monitoring.svc:3000/" },
      ],
      observability: { listen: { host: "127.0.0.1", port: 18080 } },
      logLevel: "debug",
    });
  });

  test("environment variables stand in for flags; flags win", async () => {
    const config = await load(["--log-level", "warn"], {
      AGENTK_KAS_ADDRESS: "ws://127.0.0.1:8150",
      AGENTK_TOKEN: ` ${TOKEN} `,
      AGENTK_LOG_LEVEL: "error",
      AGENTK_KAS_HEADERS: "X-A: 1\nX-B: 2\n",
      AGENTK_SERVICES: "a=http://a:1,b=http://b:2",
      AGENTK_OBSERVABILITY_LISTEN_ADDRESS: "[::1]:9090",
      AGENTK_KAS_INSECURE_SKIP_TLS_VERIFY: "true",
      AGENTK_KEEPALIVE_INTERVAL: "1m",
    });
    expect(config.keepAliveIntervalMs).toBe(60_000);
    expect(config.kasAddress).toBe("ws://127.0.0.1:8150/");
    expect(config.token.reveal()).toBe(TOKEN);
    expect(config.logLevel).toBe("warn");
    expect(config.kasHeaders).toEqual({ "X-A": "1", "X-B": "2" });
    expect(config.services.map((s) => s.name)).toEqual(["a", "b"]);
    expect(config.observability.listen).toEqual({ host: "::1", port: 9090 });
    expect(config.kasInsecureSkipTlsVerify).toBe(true);
  });

  test("in a pod: in-cluster Kubernetes configuration and the namespace from the service account", async () => {
    const sa = join(dir, "serviceaccount");
    await mkdir(sa, { recursive: true });
    await writeFile(join(sa, "token"), "sa-token");
    await writeFile(join(sa, "ca.crt"), "ca");
    await writeFile(join(sa, "namespace"), "agents\n");
    const config = await load(
      [...BASE, tokenFile],
      { KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "443" },
      { serviceAccountDir: sa },
    );
    expect(config.kubernetes).toEqual({
      kind: "in-cluster",
      server: "https://[fd00::1]:443",
      tokenFile: join(sa, "token"),
      caFile: join(sa, "ca.crt"),
    });
    expect(config.pod.namespace).toBe("agents");
  });

  test("KUBECONFIG with several files keeps those that exist", async () => {
    const a = join(dir, "kc-a");
    await writeFile(a, "apiVersion: v1\n");
    const config = await load([...BASE, tokenFile], { KUBECONFIG: `${join(dir, "missing")}:${a}` });
    expect(config.kubernetes).toEqual({ kind: "kubeconfig", paths: [a] });
  });

  test.each<[string, string[], NodeJS.ProcessEnv, string]>([
    ["no kas address", ["--token-file", "T"], {}, "--kas-address: required (or AGENTK_KAS_ADDRESS)"],
    [
      "a grpc kas address",
      ["--kas-address", "grpcs://kas:443", "--token-file", "T"],
      {},
      "--kas-address: grpcs://kas:443: this agentk reaches kas over WebSocket only",
    ],
    [
      "an http kas address",
      ["--kas-address", "https://kas", "--token-file", "T"],
      {},
      '--kas-address: expected a ws/wss URL, got scheme "https"',
    ],
    ["no token", ["--kas-address", "wss://kas"], {}, "--token-file: required (or the token in AGENTK_TOKEN)"],
    [
      "two tokens",
      [...BASE, "T"],
      { AGENTK_TOKEN: TOKEN },
      "--token-file: and AGENTK_TOKEN are both set; use one",
    ],
    [
      "a missing token file",
      [...BASE, "/nonexistent/token"],
      {},
      "--token-file: cannot read /nonexistent/token: ENOENT",
    ],
    [
      "a bad header",
      [...BASE, "T", "--kas-header", "no colon here"],
      {},
      '--kas-header: expected "Name: value", got "no colon here"',
    ],
    [
      "an Authorization header",
      [...BASE, "T", "--kas-header", "Authorization: Bearer x"],
      {},
      "--kas-header: Authorization cannot be set: the handshake sets it",
    ],
    [
      "a bad service",
      [...BASE, "T", "--service", "prometheus"],
      {},
      '--service: expected name=http://host:port, got "prometheus"',
    ],
    [
      "a bad service name",
      [...BASE, "T", "--service", "Prom_1=http://p"],
      {},
      '--service: service name "Prom_1" must be a DNS label',
    ],
    [
      "a bad service URL",
      [...BASE, "T", "--service", "p=ftp://p"],
      {},
      '--service: service p: expected a http/https URL, got scheme "ftp"',
    ],
    [
      "a duplicate service",
      [...BASE, "T", "--service", "p=http://a", "--service", "p=http://b"],
      {},
      "--service: service p is defined twice",
    ],
    [
      "a bad listen address",
      [...BASE, "T", "--observability-listen-address", "8080"],
      {},
      '--observability-listen-address: expected host:port, got "8080"',
    ],
    [
      "a bad env listen address",
      [...BASE, "T"],
      { AGENTK_OBSERVABILITY_LISTEN_ADDRESS: "x" },
      'AGENTK_OBSERVABILITY_LISTEN_ADDRESS: expected host:port, got "x"',
    ],
    [
      "a bad log level",
      [...BASE, "T", "--log-level", "chatty"],
      {},
      "--log-level: expected one of trace, debug",
    ],
    [
      "a keepalive interval without a unit",
      [...BASE, "T", "--keepalive-interval", "55"],
      {},
      '--keepalive-interval: expected a duration like "300s"',
    ],
    [
      "a missing kubeconfig",
      [...BASE, "T", "--kubeconfig", "/nonexistent/kc"],
      {},
      "--kubeconfig: /nonexistent/kc does not exist or is not readable",
    ],
    [
      "a missing CA file",
      [...BASE, "T", "--ca-cert-file", "/nonexistent/ca.pem"],
      {},
      "--ca-cert-file: cannot read /nonexistent/ca.pem: ENOENT",
    ],
    [
      "in-cluster without a service account",
      [...BASE, "T"],
      { KUBERNETES_SERVICE_HOST: "10.0.0.1", KUBERNETES_SERVICE_PORT: "443" },
      "KUBERNETES_SERVICE_HOST: set, so agentk runs in a pod, but",
    ],
    [
      "an unknown flag",
      ["--kas-adress", "x"],
      {},
      "arguments: Unknown option '--kas-adress'; see agentk --help",
    ],
  ])("%s: a clear error naming the flag or variable", async (_, argv, env, message) => {
    const resolved = argv.map((a) => (a === "T" ? tokenFile : a));
    const found = await issues(resolved, env);
    expect(found.some((line) => line.startsWith(message))).toBe(true);
  });

  test("a token file with spaces inside, or empty, is refused without showing the token", async () => {
    const spaced = join(dir, "spaced");
    await writeFile(spaced, `${TOKEN} extra`);
    expect(await issues([...BASE, spaced])).toEqual([
      `--token-file: ${spaced}: the token contains spaces or non-ASCII characters`,
    ]);
    const empty = join(dir, "empty");
    await writeFile(empty, "\n");
    expect(await issues([...BASE, empty])).toEqual([`--token-file: ${empty} is empty`]);
  });

  test("a CA file that holds no certificate is refused", async () => {
    expect(await issues([...BASE, tokenFile, "--ca-cert-file", tokenFile])).toEqual([
      `--ca-cert-file: ${tokenFile} holds no PEM certificate`,
    ]);
  });

  test("an empty value for a file flag is refused, whichever flag it is", async () => {
    for (const flag of ["--services-file", "--kubeconfig", "--ca-cert-file", "--kas-tls-server-name"]) {
      const found = await issues(["--kas-address", "wss://kas.example.com", flag, ""], {
        AGENTK_TOKEN: "t0ken-t0ken",
      });
      expect(found).toContainEqual(`${flag}: must not be empty`);
    }
  });

  test("each problem is reported once, in the order of the flags, whether the flag's own value or a check after it", async () => {
    const found = await issues(
      [
        ...["--kas-address", "https://kas", "--ca-cert-file", "", "--kas-header", "nocolon"],
        ...["--kas-tls-server-name", "", "--keepalive-interval", "55", "--kubeconfig", "/nonexistent/kc"],
        ...["--service", "prometheus", "--observability-listen-address", "8080", "--log-level", "chatty"],
      ],
      { AGENTK_KAS_INSECURE_SKIP_TLS_VERIFY: "maybe" },
    );
    expect(found).toEqual([
      '--kas-address: expected a ws/wss URL, got scheme "https" in "https://kas"',
      "--token-file: required (or the token in AGENTK_TOKEN)",
      "--ca-cert-file: must not be empty",
      '--kas-header: expected "Name: value", got "nocolon"',
      'AGENTK_KAS_INSECURE_SKIP_TLS_VERIFY: expected true or false, got "maybe"',
      "--kas-tls-server-name: must not be empty",
      '--keepalive-interval: expected a duration like "300s", "1m30s" or "250ms", got "55"',
      "--kubeconfig: /nonexistent/kc does not exist or is not readable",
      '--service: expected name=http://host:port, got "prometheus"',
      '--observability-listen-address: expected host:port, got "8080"',
      '--log-level: expected one of trace, debug, info, warn, error, fatal, silent, got "chatty"',
    ]);
  });

  test("empty file flags are each reported once, in their place, and nothing more is said of them", async () => {
    const found = await issues([
      ...["--kas-address", "wss://kas", "--token-file", "", "--kubeconfig", ""],
      ...["--services-file", "", "--log-level", "x"],
    ]);
    expect(found).toEqual([
      "--token-file: must not be empty", // not also "required": the flag was given
      "--kubeconfig: must not be empty",
      "--services-file: must not be empty",
      '--log-level: expected one of trace, debug, info, warn, error, fatal, silent, got "x"',
    ]);
  });

  test("a file that cannot be read: its flag, its path and the error code", async () => {
    expect(
      await issues([
        ...["--kas-address", "wss://kas", "--token-file", "/nonexistent/token"],
        ...["--ca-cert-file", "/nonexistent/ca.pem", "--services-file", "/nonexistent/services.yaml"],
      ]),
    ).toEqual([
      "--token-file: cannot read /nonexistent/token: ENOENT",
      "--ca-cert-file: cannot read /nonexistent/ca.pem: ENOENT",
      "--services-file: cannot read /nonexistent/services.yaml: ENOENT",
    ]);
  });

  test("--services-file adds to --service; a name in both is refused under --services-file", async () => {
    const file = join(dir, "services.yaml");
    await writeFile(file, "services:\n  grafana: http://grafana.monitoring:3000\n");
    const config = await load([
      ...BASE,
      tokenFile,
      "--service",
      "prom=http://prom:9090",
      "--services-file",
      file,
    ]);
    expect(config.services.map((s) => s.name)).toEqual(["prom", "grafana"]);
    expect(
      await issues([...BASE, tokenFile, "--service", "grafana=http://g", "--services-file", file]),
    ).toEqual(["--services-file: service grafana is defined twice"]);
  });

  test("several problems are reported together", async () => {
    const found = await issues(["--log-level", "x", "--service", "y"]);
    expect(found.map((l) => l.split(":")[0])).toEqual([
      "--kas-address",
      "--token-file",
      "--service",
      "--log-level",
    ]);
  });

  test("--help: usage, every flag with its environment variable", async () => {
    expect(await loadAgentkConfig({ argv: ["--help"], env: {} })).toEqual({ help: true });
    expect(
      await loadAgentkConfig({ argv: ["-h", "--nonsense-ignored?"], env: {} }).catch((e: Error) => e.message),
    ).toContain("Unknown option");
    const help = agentkHelp();
    expect(help).toMatch(/^Usage: agentk --kas-address wss:\/\//);
    const leaves = settingLeaves(agentkFlags);
    expect(leaves.length).toBeGreaterThanOrEqual(12);
    for (const leaf of leaves) {
      expect(help).toContain(`--${flagNameOf(leaf)}`);
      expect(help).toContain(`env: ${leaf.meta.envAliases?.[0]}`);
    }
    expect(help).toContain("AGENTK_TOKEN");
    expect(help).toContain("HTTPS_PROXY, NO_PROXY");
    expect(help).toContain('(default ":8080")');
  });
});
