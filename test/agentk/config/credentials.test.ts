// What agentk sends kas to prove who it is, read on its own: the token (--token-file or
// AGENTK_TOKEN) and the extra handshake headers (--kas-header). Errors name the source, never the token.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { parseKasHeaders } from "../../../cmd/agentk/config/headers.ts";
import { readToken } from "../../../cmd/agentk/config/token.ts";

const TOKEN = "glagent-Rt5yU8iO2pA4sD6fG9hJ1kL3";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "agentk-credentials-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function file(text: string): Promise<string> {
  const path = join(dir, `token-${Math.random().toString(36).slice(2)}`);
  await writeFile(path, text);
  return path;
}

/** The token read (revealed) and the issues reported. */
async function read(path: string | undefined, env: NodeJS.ProcessEnv = {}) {
  const issues: string[] = [];
  const token = await readToken([path, "--token-file"], env, (field, message) =>
    issues.push(`${field}: ${message}`),
  );
  return { token: token?.reveal(), issues };
}

describe("readToken", () => {
  test("from the file, without the surrounding whitespace", async () => {
    expect(await read(await file(`  ${TOKEN}\r\n\n`))).toEqual({ token: TOKEN, issues: [] });
  });

  test("from AGENTK_TOKEN, without the surrounding whitespace", async () => {
    expect(await read(undefined, { AGENTK_TOKEN: ` ${TOKEN}\n` })).toEqual({ token: TOKEN, issues: [] });
  });

  test("an empty AGENTK_TOKEN is not set: the file is read", async () => {
    expect(await read(await file(TOKEN), { AGENTK_TOKEN: "" })).toEqual({ token: TOKEN, issues: [] });
  });

  test("the field named is the one the file came from", async () => {
    const issues: string[] = [];
    await readToken(["/nonexistent/token", "AGENTK_TOKEN_FILE"], {}, (field, message) =>
      issues.push(`${field}: ${message}`),
    );
    expect(issues).toEqual(["AGENTK_TOKEN_FILE: cannot read /nonexistent/token: ENOENT"]);
  });

  test.each([
    ["!", "the lowest printable character"],
    ["~", "the highest printable character"],
    ["a", "one character"],
  ])("%j is a token (%s)", async (token) => {
    expect(await read(undefined, { AGENTK_TOKEN: token })).toEqual({ token, issues: [] });
  });

  test("both the file and AGENTK_TOKEN: refused, neither read", async () => {
    expect(await read("/nonexistent/token", { AGENTK_TOKEN: TOKEN })).toEqual({
      token: undefined,
      issues: ["--token-file: and AGENTK_TOKEN are both set; use one"],
    });
  });

  test("neither: required", async () => {
    expect(await read(undefined, {})).toEqual({
      token: undefined,
      issues: ["--token-file: required (or the token in AGENTK_TOKEN)"],
    });
  });

  test("a file that cannot be read: its error code", async () => {
    expect(await read("/nonexistent/token")).toEqual({
      token: undefined,
      issues: ["--token-file: cannot read /nonexistent/token: ENOENT"],
    });
    expect(await read(dir)).toEqual({
      token: undefined,
      issues: [`--token-file: cannot read ${dir}: EISDIR`],
    });
  });

  test("empty: named by where it came from", async () => {
    const empty = await file(" \n\t\n");
    expect(await read(empty)).toEqual({ token: undefined, issues: [`--token-file: ${empty} is empty`] });
    expect(await read(undefined, { AGENTK_TOKEN: "  " })).toEqual({
      token: undefined,
      issues: ["--token-file: AGENTK_TOKEN is empty"],
    });
  });

  test.each([
    ["a space inside", `${TOKEN} x`],
    ["a space at the start of the second part", `x ${TOKEN}`],
    ["a tab inside", "ab\tcd"],
    ["a newline inside", "ab\ncd"],
    ["non-ASCII", "tokén"],
    ["DEL", "ab\x7f"],
    ["a control character", "\x01ab"],
  ])("%s: refused without showing the token", async (_, token) => {
    const fromFile = await file(token);
    const { token: read1, issues } = await read(fromFile);
    expect(read1).toBeUndefined();
    expect(issues).toEqual([`--token-file: ${fromFile}: the token contains spaces or non-ASCII characters`]);
    const fromEnv = await read(undefined, { AGENTK_TOKEN: token });
    expect(fromEnv).toEqual({
      token: undefined,
      issues: ["--token-file: AGENTK_TOKEN: the token contains spaces or non-ASCII characters"],
    });
  });
});

describe("parseKasHeaders", () => {
  const parse = (...specs: string[]) => {
    const issues: string[] = [];
    const headers = parseKasHeaders(specs, "--kas-header", (field, message) =>
      issues.push(`${field}: ${message}`),
    );
    return { headers, issues };
  };

  test("Name: value, trimmed; the value may hold colons and be empty; a later one replaces an earlier", () => {
    expect(
      parse("X-Foo: bar", "  X-Spaced  :   a b  ", "X-Url: http://x:1/y", "X-Empty:", "X-Foo: baz"),
    ).toEqual({
      headers: { "X-Foo": "baz", "X-Spaced": "a b", "X-Url": "http://x:1/y", "X-Empty": "" },
      issues: [],
    });
  });

  test("a one-character name", () => {
    expect(parse("X: v")).toEqual({ headers: { X: "v" }, issues: [] });
  });

  test("every token character HTTP allows in a name", () => {
    const name = "!#$%&'*+.^_`|~09azAZ-";
    expect(parse(`${name}: v`)).toEqual({ headers: { [name]: "v" }, issues: [] });
  });

  test.each([
    ["no colon", "no colon here"],
    ["no colon, nothing but name characters", "X-NoColon"],
    ["an empty name", ": value"],
    ["a space in the name", "X Foo: v"],
    ["a slash in the name", "X/Foo: v"],
    ["a parenthesis in the name", "X(Foo): v"],
    ["a quote in the name", 'X"Foo: v'],
    ["a non-ASCII name", "Xé: v"],
  ])("%s: refused, quoting it", (_, spec) => {
    expect(parse(spec, "X-Ok: 1")).toEqual({
      headers: { "X-Ok": "1" },
      issues: [`--kas-header: expected "Name: value", got ${JSON.stringify(spec)}`],
    });
  });

  test("the quote stops at 40 characters", () => {
    const spec = `${"x".repeat(50)} no colon`;
    expect(parse(spec).issues).toEqual([
      `--kas-header: expected "Name: value", got ${JSON.stringify("x".repeat(40))}`,
    ]);
  });

  test.each([
    "Authorization",
    "authorization",
    "Host",
    "Connection",
    "UPGRADE",
    "Content-Length",
    "Transfer-Encoding",
    "Sec-WebSocket-Key",
    "sec-websocket-protocol",
  ])("%s cannot be set: the handshake sets it", (name) => {
    expect(parse(`${name}: x`)).toEqual({
      headers: {},
      issues: [`--kas-header: ${name} cannot be set: the handshake sets it`],
    });
  });

  test.each(["X-Authorization", "Authorization-X", "Hostname", "Sec-WebSocket", "X-Sec-WebSocket-Key"])(
    "%s is another header",
    (name) => {
      expect(parse(`${name}: x`)).toEqual({ headers: { [name]: "x" }, issues: [] });
    },
  );
});
