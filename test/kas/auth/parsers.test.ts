// The agent-facing credential rules of kas, each at its edge: the Bearer header of a tunnel
// handshake, the handshake hook's answers, and the static tokens file. The e2e tests
// (handshake.test.ts, static-authenticator.test.ts) show them wired; these pin what each accepts.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import {
  AgentAuthError,
  AgentToken,
  bearerToken,
  createAgentAuthenticate,
  parseStaticTokens,
  StaticTokenAuthenticator,
  tokenFingerprint,
} from "../../../cmd/kas/auth/index.ts";
import { staticTokenFor } from "../../../cmd/kas/auth/static-authenticator.ts";
import { HandshakeRejection, type HandshakeRequest } from "../../../lib/tunnel/index.ts";

const TOKEN = "glagent-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH";

describe("bearerToken", () => {
  test("takes Bearer in any case, with spaces or tabs around the token", () => {
    expect(bearerToken(`Bearer ${TOKEN}`)).toBe(TOKEN);
    expect(bearerToken(`bEARER ${TOKEN}`)).toBe(TOKEN);
    expect(bearerToken(`Bearer \t ${TOKEN} \t`)).toBe(TOKEN);
    expect(bearerToken(`Bearer !~${"x".repeat(1022)}`)).toBe(`!~${"x".repeat(1022)}`);
  });

  test("refuses anything else: no scheme, other schemes, no space, spaces inside, non-ASCII, too long, repeated", () => {
    for (const header of [
      TOKEN,
      `Basic ${TOKEN}`,
      `Bearer${TOKEN}`,
      "Bearer ",
      "Bearer",
      `Bearer ${TOKEN} x`,
      `Bearer a${"\u00e9"}b`,
      `Bearer a\u007fb`,
      `Bearer ${"x".repeat(1025)}`,
      ` Bearer ${TOKEN}`,
      `xBearer ${TOKEN}`,
      `Bearer ${TOKEN}\n`,
      "",
    ]) {
      expect(bearerToken(header), JSON.stringify(header)).toBeUndefined();
    }
    expect(bearerToken([`Bearer ${TOKEN}`])).toBeUndefined();
    expect(bearerToken(undefined)).toBeUndefined();
  });
});

describe("createAgentAuthenticate", () => {
  const request = (headers: HandshakeRequest["headers"]): HandshakeRequest => ({
    httpVersion: "h1",
    method: "GET",
    path: "/",
    pathname: "/",
    query: new URLSearchParams(),
    headers,
    remoteAddress: "192.0.2.7",
    remotePort: 4000,
    secure: true,
  });
  const agent = { agentId: "7", projectId: "70", agentName: "prod" };

  function setup(authenticateAgent: (token: string) => Promise<typeof agent>) {
    const results: string[] = [];
    const logged: { level: string; obj: object; msg: string }[] = [];
    const authenticate = createAgentAuthenticate({
      authenticator: { authenticateAgent },
      onResult: (r) => results.push(r),
      log: {
        info: (obj, msg) => logged.push({ level: "info", obj, msg }),
        warn: (obj, msg) => logged.push({ level: "warn", obj, msg }),
      },
    });
    return { authenticate, results, logged };
  }
  const signal = new AbortController().signal;

  async function refusal(p: Promise<unknown>): Promise<HandshakeRejection> {
    const err = await p.then(
      () => new Error("expected a refusal"),
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(HandshakeRejection);
    return err as HandshakeRejection;
  }

  test("no usable token: 401 with a challenge, told as unauthenticated, GitLab never asked", async () => {
    let asked = 0;
    const { authenticate, results } = setup(async () => {
      asked++;
      return agent;
    });
    const err = await refusal(authenticate(request({ authorization: "Basic x" }), { signal }));
    expect(err.status).toBe(401);
    expect(err.message).toBe('expected "Authorization: Bearer <agent token>"');
    expect(err.headers).toEqual({ "www-authenticate": 'Bearer realm="gitlab-agent"' });
    expect(results).toEqual(["unauthenticated"]);
    expect(asked).toBe(0);
  });

  test("a known token: the agent with its token (redacted) and, when named, its pod", async () => {
    const { authenticate, results } = setup(async (token) => {
      expect(token).toBe(TOKEN);
      return agent;
    });
    const bare = await authenticate(request({ authorization: `Bearer ${TOKEN}` }), { signal });
    expect(bare).toEqual({ ...agent, token: expect.any(AgentToken) });
    expect(bare.token.reveal()).toBe(TOKEN);
    expect("pod" in bare).toBe(false);
    const withPod = await authenticate(
      request({ authorization: `Bearer ${TOKEN}`, "x-agentk-pod-name": "agentk-0" }),
      { signal },
    );
    expect(withPod.pod).toEqual({ name: "agentk-0" });
    expect(results).toEqual(["ok", "ok"]);
  });

  test("a definitive refusal keeps its status, is logged at info with the fingerprint, never the token", async () => {
    const { authenticate, results, logged } = setup(async () => {
      throw new AgentAuthError("not_found", "agent does not exist");
    });
    const err = await refusal(authenticate(request({ authorization: `Bearer ${TOKEN}` }), { signal }));
    expect([err.status, err.message, err.headers]).toEqual([404, "agent does not exist", {}]);
    expect(results).toEqual(["not_found"]);
    expect(logged).toEqual([
      {
        level: "info",
        obj: {
          tokenFingerprint: tokenFingerprint(TOKEN),
          code: "not_found",
          remoteAddress: "192.0.2.7",
          reason: "agent does not exist",
        },
        msg: "agent refused",
      },
    ]);
    expect(JSON.stringify(logged)).not.toContain(TOKEN);
  });

  test("any other failure is 503 with Retry-After, logged at warn, its detail kept out of the answer", async () => {
    const { authenticate, results, logged } = setup(async () => {
      throw new Error(`socket hang up talking about ${TOKEN}`);
    });
    const err = await refusal(authenticate(request({ authorization: `Bearer ${TOKEN}` }), { signal }));
    expect([err.status, err.message, err.headers]).toEqual([
      503,
      "authentication failed",
      { "retry-after": "5" },
    ]);
    expect(results).toEqual(["unavailable"]);
    expect(logged.map((l) => [l.level, l.msg])).toEqual([["warn", "agent authentication unavailable"]]);
    // The log says what went wrong underneath, with the token cut out of the foreign error's text.
    expect(logged[0]!.obj).toMatchObject({
      code: "unavailable",
      reason: "authentication failed",
      cause: "Error: socket hang up talking about [token]",
    });
    expect(JSON.stringify(logged)).not.toContain(TOKEN);
  });

  test("once the handshake is gone, the failure passes through untouched and nothing is told", async () => {
    const ac = new AbortController();
    const cause = new Error("aborted while asking GitLab");
    const { authenticate, results, logged } = setup(async () => {
      ac.abort();
      throw cause;
    });
    await expect(
      authenticate(request({ authorization: `Bearer ${TOKEN}` }), { signal: ac.signal }),
    ).rejects.toBe(cause);
    expect(results).toEqual([]);
    expect(logged).toEqual([]);
  });

  test("without onResult or log, every outcome is still answered", async () => {
    const seen: (AbortSignal | undefined)[] = [];
    const quiet = (fail: boolean) =>
      createAgentAuthenticate({
        authenticator: {
          authenticateAgent: async (_token, options) => {
            seen.push(options?.signal);
            if (fail) throw new AgentAuthError("permission_denied", "agent is blocked");
            return agent;
          },
        },
      });
    const ac = new AbortController();
    await expect(
      quiet(false)(request({ authorization: `Bearer ${TOKEN}` }), { signal: ac.signal }),
    ).resolves.toMatchObject(agent);
    // The handshake's signal reaches the authenticator, so a GitLab call stops when the handshake does.
    expect(seen).toEqual([ac.signal]);
    expect(
      (await refusal(quiet(true)(request({ authorization: `Bearer ${TOKEN}` }), { signal }))).status,
    ).toBe(403);
    expect((await refusal(quiet(false)(request({}), { signal }))).status).toBe(401);
    const broken = createAgentAuthenticate({
      authenticator: {
        authenticateAgent: async () => {
          throw new Error("down");
        },
      },
    });
    expect((await refusal(broken(request({ authorization: `Bearer ${TOKEN}` }), { signal }))).status).toBe(
      503,
    );
  });

  test("AgentAuthError maps each code to its status; only unavailable is not definitive", () => {
    const codes = ["unauthenticated", "permission_denied", "not_found", "unavailable"] as const;
    expect(codes.map((c) => new AgentAuthError(c, "m").httpStatus)).toEqual([401, 403, 404, 503]);
    expect(codes.map((c) => new AgentAuthError(c, "m").definitive)).toEqual([true, true, true, false]);
    expect(new AgentAuthError("not_found", "m").name).toBe("AgentAuthError");
  });

  test("AgentAuthError.from keeps one as it is and makes anything else unavailable, kept as its cause", () => {
    const refusal = new AgentAuthError("not_found", "gone");
    expect(AgentAuthError.from(refusal)).toBe(refusal);
    expect(refusal.causeText("t")).toBeUndefined();
    const wrapped = AgentAuthError.from(new RangeError("bad t!"));
    expect([wrapped.code, wrapped.message, wrapped.definitive]).toEqual([
      "unavailable",
      "authentication failed",
      false,
    ]);
    expect(wrapped.causeText("t!")).toBe("RangeError: bad [token]");
    expect(wrapped.causeText("")).toBe("RangeError: bad t!"); // no token to cut
    expect(AgentAuthError.from("down").causeText("x")).toBe("down"); // not even an Error
    // An AgentAuthError as the cause has said its piece in the message already.
    expect(new AgentAuthError("unavailable", "m", { cause: refusal }).causeText("t")).toBeUndefined();
  });
});

describe("parseStaticTokens", () => {
  const parse = (text: string) => parseStaticTokens(text, "tokens.yaml");
  const message = (text: string): string => {
    try {
      parse(text);
    } catch (err) {
      return (err as Error).message;
    }
    throw new Error("expected a refusal");
  };
  const entry = (fields: string) => `secret-tok: {${fields}}\n`;

  test("ids may be positive integers or their decimal text; anything else is refused", () => {
    expect(parse(entry("agentId: 1, projectId: '9007199254740993', agentName: a")).get("secret-tok")).toEqual(
      {
        agentId: "1",
        projectId: "9007199254740993",
        agentName: "a",
      },
    );
    for (const bad of ["0", "-1", "1.5", "'01'", "'1 '", "''", "9007199254740993", "true", "[1]"]) {
      expect(message(entry(`agentId: ${bad}, projectId: 1, agentName: a`)), bad).toBe(
        "tokens.yaml: entry #1: agentId: expected a positive integer id",
      );
    }
    expect(message(entry("agentId: 1, projectId: 0, agentName: a"))).toBe(
      "tokens.yaml: entry #1: projectId: expected a positive integer id",
    );
  });

  test("a token must be non-empty and without whitespace; an entry must be a mapping with a name", () => {
    expect(message("'': {agentId: 1, projectId: 1, agentName: a}\n")).toBe(
      "tokens.yaml: entry #1: the token must be non-empty without spaces",
    );
    expect(message("'secret tok': {agentId: 1, projectId: 1, agentName: a}\n")).toBe(
      "tokens.yaml: entry #1: the token must be non-empty without spaces",
    );
    expect(message("secret-tok: 5\n")).toBe(
      "tokens.yaml: entry #1: expected {agentId, projectId, agentName}",
    );
    expect(message("secret-tok: null\n")).toBe(
      "tokens.yaml: entry #1: expected {agentId, projectId, agentName}",
    );
    expect(message(entry("agentId: 1, projectId: 1, agentName: ''"))).toBe(
      "tokens.yaml: entry #1: agentName: expected a non-empty string",
    );
    expect(message(entry("agentId: 1, projectId: 1, agentName: 5"))).toBe(
      "tokens.yaml: entry #1: agentName: expected a non-empty string",
    );
    expect(message("null\n")).toBe(
      "tokens.yaml: expected a mapping of token -> {agentId, projectId, agentName}",
    );
    expect(message("just text\n")).toBe(
      "tokens.yaml: expected a mapping of token -> {agentId, projectId, agentName}",
    );
  });

  test("repository, when given, is an absolute path", () => {
    const base = "agentId: 1, projectId: 1, agentName: a";
    expect(parse(entry(`${base}, repository: /srv/repo.git`)).get("secret-tok")?.localRepository).toBe(
      "/srv/repo.git",
    );
    expect("localRepository" in parse(entry(base)).get("secret-tok")!).toBe(false);
    for (const bad of ["repo.git", "5"]) {
      expect(message(entry(`${base}, repository: ${bad}`))).toBe(
        "tokens.yaml: entry #1: repository: expected the absolute path of a git repository",
      );
    }
  });

  test("manifest_projects maps full project paths to absolute paths; each rule of a full path is enforced", () => {
    const base = "agentId: 1, projectId: 1, agentName: a";
    const parsed = parse(entry(`${base}, manifest_projects: {"g/p": /srv/p.git, "g/sub/q": /srv/q.git}`));
    expect(parsed.get("secret-tok")?.localManifestProjects).toEqual({
      "g/p": "/srv/p.git",
      "g/sub/q": "/srv/q.git",
    });
    expect(
      "localManifestProjects" in parse(entry(`${base}, manifest_projects: null`)).get("secret-tok")!,
    ).toBe(false);
    for (const bad of ["[]", "5"]) {
      expect(message(entry(`${base}, manifest_projects: ${bad}`))).toBe(
        "tokens.yaml: entry #1: manifest_projects: expected a mapping of project full path -> absolute path of its git repository",
      );
    }
    for (const project of ["", "42", "/g/p", "g/p/", "g//p", "g/p q"]) {
      expect(
        message(entry(`${base}, manifest_projects: {${JSON.stringify(project)}: /srv/x.git}`)),
        project,
      ).toBe(
        `tokens.yaml: entry #1: manifest_projects: ${JSON.stringify(project)}: expected a project's full path, e.g. "group/project"`,
      );
    }
    for (const path of ["x.git", "5"]) {
      expect(message(entry(`${base}, manifest_projects: {"g/p": ${path}}`))).toBe(
        "tokens.yaml: entry #1: manifest_projects.g/p: expected the absolute path of a git repository",
      );
    }
  });

  test("the static authenticator hands out copies of the manifest projects, and only what was listed", async () => {
    const auth = new StaticTokenAuthenticator(
      parse(entry('agentId: 1, projectId: 1, agentName: a, manifest_projects: {"g/p": /srv/p.git}')),
    );
    const info = await auth.authenticateAgent("secret-tok");
    expect(info.localManifestProjects).toEqual({ "g/p": "/srv/p.git" });
    (info.localManifestProjects as Record<string, string>)["g/p"] = "/elsewhere";
    expect((await auth.authenticateAgent("secret-tok")).localManifestProjects).toEqual({
      "g/p": "/srv/p.git",
    });
    const plain = new StaticTokenAuthenticator(parse(entry("agentId: 1, projectId: 1, agentName: a")));
    expect("localManifestProjects" in (await plain.authenticateAgent("secret-tok"))).toBe(false);
  });

  test("without a path the messages name 'static tokens file'; a YAML error says where, or nothing when it has no place", () => {
    const message = (text: string, path?: string) => {
      try {
        parseStaticTokens(text, path);
      } catch (err) {
        return (err as Error).message;
      }
      throw new Error("expected a refusal");
    };
    expect(message("- a\n")).toBe(
      "static tokens file: expected a mapping of token -> {agentId, projectId, agentName}",
    );
    expect(message("a: 1\nbb: 2\ncccc: x: y\n", "t.yaml")).toBe(
      "t.yaml: not valid YAML or JSON at line 3, column 7",
    );
    // An alias bomb: the parser refuses it without a position.
    const bomb = ["a: &a [1,1,1,1,1,1,1,1,1,1]"];
    for (const [name, prev] of [
      ["b", "a"],
      ["c", "b"],
      ["d", "c"],
      ["e", "d"],
    ] as const)
      bomb.push(`${name}: &${name} [${Array(10).fill(`*${prev}`).join(",")}]`);
    expect(message(`${bomb.join("\n")}\n`, "t.yaml")).toBe("t.yaml: not valid YAML or JSON");
  });

  test("a project path may hold digits, only not be all digits (that would read as a project id)", () => {
    const base = "agentId: 1, projectId: 1, agentName: a";
    const parsed = parse(entry(`${base}, manifest_projects: {"g/42": /srv/a.git, "42/g": /srv/b.git}`));
    expect(parsed.get("secret-tok")?.localManifestProjects).toEqual({
      "g/42": "/srv/a.git",
      "42/g": "/srv/b.git",
    });
  });

  test("an unknown token is refused as invalid or revoked", async () => {
    const auth = new StaticTokenAuthenticator(parse(entry("agentId: 1, projectId: 1, agentName: a")));
    await expect(auth.authenticateAgent("other")).rejects.toThrow(
      new AgentAuthError("unauthenticated", "agent token is invalid or revoked"),
    );
  });

  test("staticTokenFor: the first token listed for the agent, none for an agent without one", async () => {
    const dir = await mkdtemp(join(tmpdir(), "kas-static-for-"));
    try {
      const path = join(dir, "tokens.yaml");
      await writeFile(
        path,
        [
          "tok-other: {agentId: 2, projectId: 1, agentName: b}",
          "tok-first: {agentId: 7, projectId: 1, agentName: a}",
          "tok-second: {agentId: 7, projectId: 1, agentName: a}",
          "",
        ].join("\n"),
      );
      expect(await staticTokenFor(path, "7")).toBe("tok-first");
      expect(await staticTokenFor(path, "2")).toBe("tok-other");
      expect(await staticTokenFor(path, "3")).toBeUndefined();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("each token finds its own agent, wherever it stands in the table", async () => {
    const auth = new StaticTokenAuthenticator({
      first: { agentId: "1", projectId: "1", agentName: "a" },
      second: { agentId: "2", projectId: "2", agentName: "b" },
    });
    expect((await auth.authenticateAgent("second")).agentId).toBe("2");
    expect((await auth.authenticateAgent("first")).agentId).toBe("1");
  });
});
