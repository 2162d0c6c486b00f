import { createServer } from "node:http";
import type { Socket } from "node:net";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type InProcessAgentk, startInProcessAgentk } from "../support/agentk-in-process.ts";
import { rawExchange } from "../support/raw-http.ts";
import { RedisServer } from "../support/redis-server.ts";
import { AGENT_ID, gitlabJwt, TOKEN } from "./support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "./support/in-process.ts";

// Issue 10, item 3: whatever a client sends to any of kas's HTTP fronts, kas answers with a
// well-formed status and stays up. Requests are written raw: malformed percent-encodings, junk
// headers and Upgrades are what no client library would send.

interface FuzzRequest {
  method: string;
  path: string;
  /** One of the front's credentials (valid or not), or none. */
  credential: [string, string] | undefined;
  /** `Connection: Upgrade` to this protocol (with a WebSocket's headers for "websocket"). */
  upgrade: string | undefined;
  headers: Array<[string, string]>;
  body: { kind: "none" } | { kind: "length" | "chunked"; data: string };
}

const METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT"];
/** Route pieces of every front, so requests get past the routing, plus bad encodings. */
const SEGMENTS = [
  ...["api", "v1", "agents", AGENT_ID, "1", "0", "-1", "services", "prometheus", "kubernetes", "Nope"],
  ...["metrics", "liveness", "readiness", "namespaces", "pods", "exec", ""],
  ...[".", "..", "%", "%2", "%zz", "%E0%A4%A", "x%E0%A4%A", "%C0%80", "%FF", "%00", "%2F", "%25", "%u0041"],
];
/** Printable ASCII and a few bytes a request line should not hold. */
const PATH_CHAR = fc.oneof(
  { weight: 20, arbitrary: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)) },
  { weight: 1, arbitrary: fc.constantFrom("\t", "\x7f", "\x00", "é") },
);

const segment = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...SEGMENTS) },
  { weight: 2, arbitrary: fc.string({ maxLength: 12 }).map(encodeURIComponent) },
  { weight: 1, arbitrary: fc.string({ unit: PATH_CHAR, maxLength: 12 }) },
);
/** A path under one of `prefixes` (the front's routes), or anything. */
const pathArb = (prefixes: string[]) =>
  fc
    .tuple(
      fc.constantFrom("/", ...prefixes),
      fc.oneof(fc.constant([]), fc.array(segment, { maxLength: 6 })),
      fc.option(fc.array(segment, { minLength: 1, maxLength: 3 }), { nil: undefined }),
    )
    .map(([prefix, segments, query]) => {
      const path = prefix.endsWith("/") ? `${prefix}${segments.join("/")}` : [prefix, ...segments].join("/");
      return query ? `${path}?${query.join("&")}` : path;
    });

const token = fc.string({ unit: fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz-0123456789"), minLength: 1 });
const headerArb = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom<[string, string]>(
      ["connection", "Upgrade"],
      ["upgrade", "websocket"],
      ["upgrade", "SPDY/3.1"],
      ["sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="],
      ["sec-websocket-version", "13"],
      ["sec-websocket-protocol", "other.v1"],
      ["impersonate-user", "admin"],
      ["cookie", "_gitlab_session=x"],
      ["accept", "application/json"],
    ),
  },
  { weight: 1, arbitrary: fc.tuple(token, fc.string({ unit: PATH_CHAR, maxLength: 20 })) },
);

/** What a front is sent: its routes and credentials (good and bad), and the methods to try. */
interface FrontProfile {
  prefixes: string[];
  credentials: Array<[string, string]>;
  methods?: string[];
}

const requestArb = ({ prefixes, credentials, methods = METHODS }: FrontProfile): fc.Arbitrary<FuzzRequest> =>
  fc.record({
    method: fc.constantFrom(...methods),
    path: pathArb(prefixes),
    credential: fc.option(fc.constantFrom(...credentials), { nil: undefined, freq: 4 }),
    upgrade: fc.option(fc.constantFrom("websocket", "SPDY/3.1", "h2c"), { nil: undefined, freq: 2 }),
    headers: fc.array(headerArb, { maxLength: 4 }),
    body: fc.oneof(
      { weight: 3, arbitrary: fc.constant({ kind: "none" as const }) },
      {
        weight: 1,
        arbitrary: fc.record({
          kind: fc.constantFrom("length" as const, "chunked" as const),
          data: fc.string(),
        }),
      },
    ),
  });

/** The request as bytes: every header as generated, the body framed as its kind says. */
function render(r: FuzzRequest): Buffer {
  const lines = [`${r.method} ${r.path} HTTP/1.1`, "host: kas"];
  if (r.credential) lines.push(r.credential.join(": "));
  if (r.upgrade) lines.push("connection: Upgrade", `upgrade: ${r.upgrade}`);
  if (r.upgrade === "websocket") {
    lines.push("sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==", "sec-websocket-version: 13");
    lines.push("sec-websocket-protocol: gitlab-agent-tunnel.v1");
  }
  lines.push(...r.headers.map(([n, v]) => `${n}: ${v}`));
  let body = Buffer.alloc(0);
  if (r.body.kind !== "none") {
    const data = Buffer.from(r.body.data);
    if (r.body.kind === "length") {
      lines.push(`content-length: ${data.length}`);
      body = data;
    } else {
      lines.push("transfer-encoding: chunked");
      const chunk = data.length > 0 ? `${data.length.toString(16)}\r\n${r.body.data}\r\n` : "";
      body = Buffer.from(`${chunk}0\r\n\r\n`);
    }
  }
  return Buffer.concat([Buffer.from(`${lines.join("\r\n")}\r\n\r\n`, "latin1"), body]);
}

describe("kas's HTTP fronts under random requests (in-process kas with Redis, in-process agentk)", () => {
  let redis: RedisServer;
  let kas: InProcessKas;
  let agent: InProcessAgentk;
  let jwt: string;

  beforeAll(async () => {
    redis = await RedisServer.start();
    kas = await startInProcessKas(
      (config) => {
        config.agent.dialTimeoutMs = 200; // requests for agents that are not connected fail fast
      },
      { redis: { host: redis.host, port: redis.port } },
    );
    jwt = await gitlabJwt(kas.apiSecret);
    // The agent's services: answer every request, accept every Upgrade and hang up.
    const service = createServer((req, res) => {
      req.resume();
      req.on("end", () => res.end("ok\n"));
    });
    service.on("upgrade", (_req, socket: Socket) => {
      socket.end("HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n");
    });
    agent = await startInProcessAgentk({
      kasUrl: kas.addresses.agent,
      token: TOKEN,
      services: { prometheus: service },
      kubernetes: service,
    });
    await agent.agent.client.ready(5000);
  });
  afterAll(async () => {
    await agent?.stop();
    await kas?.close();
    await redis?.close();
  });

  const port = (url: string | undefined) => Number(new URL(url!).port);
  const fronts = (): Array<FrontProfile & { name: string; port: number }> => [
    {
      name: "API (8153)",
      port: port(kas.addresses.api),
      prefixes: [
        "/api/v1/agents",
        `/api/v1/agents/${AGENT_ID}/services/prometheus/`,
        `/api/v1/agents/${AGENT_ID}/services/`,
        "/api/v1/agents/1/services/x%E0%A4%A/",
      ],
      credentials: [
        ["gitlab-kas-api-request", jwt],
        ["gitlab-kas-api-request", "not.a.jwt"],
      ],
    },
    {
      name: "Kubernetes API proxy (8154)",
      port: port(kas.addresses.kubernetesApi),
      prefixes: ["/api/v1/", "/apis/apps/v1/namespaces/default/", "/api/v1/namespaces/default/pods/p/exec"],
      credentials: [
        ["authorization", `Bearer ${TOKEN}`],
        ["authorization", "Bearer unknown-token"],
      ],
    },
    {
      name: "observability (8151)",
      port: port(kas.addresses.observability),
      prefixes: ["/metrics", "/liveness", "/readiness"],
      credentials: [["authorization", "Bearer x"]],
    },
    {
      // The tunnel transport (lib/tunnel) drops an HTTP/1.1 CONNECT without an answer, as node:http does.
      name: "private API (8155)",
      port: port(kas.addresses.privateApi),
      prefixes: ["/"],
      credentials: [
        ["authorization", "Bearer not.a.jwt"],
        ["authorization", "Basic eDp5"],
      ],
      methods: METHODS.filter((m) => m !== "CONNECT"),
    },
  ];

  test("every request gets a well-formed status, never a 500, and every front still answers after", async () => {
    expect(kas.addresses.privateApi).toBeDefined();
    for (const front of fronts()) {
      await fc.assert(
        fc.asyncProperty(requestArb(front), async (r) => {
          const answer = await rawExchange(front.port, render(r));
          expect(answer.statusLine, `${front.name}: ${JSON.stringify(r)}`).toMatch(/^HTTP\/1\.1 \d{3} \S/);
          expect(answer.status, `${front.name}: ${JSON.stringify(r)}`).toBeGreaterThanOrEqual(101);
          expect(answer.status, `${front.name}: ${JSON.stringify(r)}`).not.toBe(500);
        }),
        { numRuns: 50 },
      );
    }
    // Still up, every front.
    const listed = await fetch(`${kas.addresses.api}/api/v1/agents`, {
      headers: { "gitlab-kas-api-request": jwt },
    });
    expect(listed.status).toBe(200);
    expect((await fetch(`${kas.addresses.observability}/liveness`)).status).toBe(200);
    const viaProxy = await fetch(`${kas.addresses.kubernetesApi}/api`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(viaProxy.status).toBe(200);
    expect(
      (await rawExchange(port(kas.addresses.privateApi), "GET / HTTP/1.1\r\nhost: kas\r\n\r\n")).status,
    ).toBe(426);
  });
});
