import { describe, expect, test } from "vitest";
import { ConfigError, KAS_FIELDS, kasHelp, parseKasArgs } from "../../../cmd/kas/config/index.ts";

describe("kas command line", () => {
  test("--config / -c and --help / -h", () => {
    expect(parseKasArgs(["--config", "/etc/kas.yaml"])).toEqual({ help: false, configFile: "/etc/kas.yaml" });
    expect(parseKasArgs(["-c", "k.yaml"])).toEqual({ help: false, configFile: "k.yaml" });
    expect(parseKasArgs(["--help"])).toEqual({ help: true });
    expect(parseKasArgs(["-h"])).toEqual({ help: true });
    expect(parseKasArgs([])).toEqual({ help: false });
  });

  test("--configuration-file, GitLab's kas's name for --config", () => {
    expect(parseKasArgs(["--configuration-file", "/etc/kas/config.yaml"])).toEqual({
      help: false,
      configFile: "/etc/kas/config.yaml",
    });
    expect(parseKasArgs(["--configuration-file=k.yaml"])).toEqual({ help: false, configFile: "k.yaml" });
    expect(() => parseKasArgs(["-c", "a.yaml", "--configuration-file", "b.yaml"])).toThrow(
      "arguments: give --config or --configuration-file (the same option), not both",
    );
  });

  test.each([["--nope"], ["stray"], ["--config"]])("%s is an error pointing at --help", (arg) => {
    let err: unknown;
    try {
      parseKasArgs([arg]);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/^arguments: .*; see kas --help$/);
  });

  test("--help documents usage and every setting with its default and environment variable", () => {
    const help = kasHelp();
    expect(help).toMatch(/^Usage: kas \[--config kas\.yaml\]/);
    for (const field of KAS_FIELDS) expect(help).toContain(field.path);
    expect(help).toContain('agent.listen.address  <host:port> (default "127.0.0.1:8150")');
    expect(help).toContain("env: KAS_AGENT_LISTEN_ADDRESS");
    expect(help).toContain("env: KAS_PRIVATE_API_OWN_URL, OWN_PRIVATE_API_URL");
    expect(help).toContain('(default "300s")');
    expect(help).toContain("--configuration-file <file>");
    expect(help).toMatch(
      /observability\.sentry\.dsn {2}<string>\n.*\n {6}GitLab's, not used: this kas does not send errors to Sentry/,
    );
  });
});
