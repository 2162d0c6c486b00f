// The Kubernetes API proxy (8154) as an attacker sees it: whatever a client sends (headers, the
// hop-by-hop names its Connection header lists, Upgrade variants, framing, a forged identity
// header), the API server behind agentk sees exactly the identity kas decided plus the client's
// end-to-end headers, and never the client's own Authorization, Cookie or Impersonate-*.
import { once } from "node:events";
import { connect } from "node:net";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { encodeIdentity } from "../../modules/kubernetes_api/identity.ts";
import { TOKEN } from "../kas/support/fixtures.ts";
import { startConnectionNamingProxy } from "../support/connection-naming-proxy.ts";
import type { UserInfo } from "../support/kube/impersonation.ts";
import { kubectlFor } from "../support/kube/kubectl.ts";
import type { RecordedRequest } from "../support/kube/server.ts";
import type { KubeApiServer } from "../support/kube-apiserver.ts";
import { type KubeProxySetup, startKubeProxySetup } from "../support/kube-proxy-setup.ts";
import { writeKubeconfig } from "../support/kubeconfig.ts";
import { rawExchange } from "../support/raw-http.ts";

const CONFIG = {
  ci_access: {
    projects: [
      { id: "group/job", access_as: { ci_job: {} } },
      { id: "group/ci-user", access_as: { ci_user: {} } },
      { id: "group/deployer", access_as: { impersonate: { username: "deployer", groups: ["ops", "dev"] } } },
      { id: "group/as-agent" },
    ],
  },
  user_access: { access_as: { user: {} }, projects: [{ id: "group/job" }] },
};

interface Caller {
  name: string;
  /** The credential lines of the request. */
  credentials: [string, string][];
  /** As whom kas must have the cluster see it; undefined: as agentk itself. */
  expected?: UserInfo;
}

let setup: KubeProxySetup;
let kube: KubeApiServer;
let callers: Caller[];

// GitLab's projects (in group "group", id 55); GitLab lets their jobs use agent 42 from the
// ci_access kas posted.
const PROJECT_IDS: Record<string, number> = {
  "group/job": 100,
  "group/ci-user": 101,
  "group/deployer": 102,
  "group/as-agent": 103,
};

/** A CI job of project `path` (id `projectId`, one of PROJECT_IDS). */
function job(jobId: number, projectId: number, path: string): string {
  expect(PROJECT_IDS[path]).toBe(projectId);
  setup.gitlab.addJob(`job-token-${jobId}`, {
    jobId,
    pipelineId: jobId + 1000,
    projectId,
    user: { id: 5, username: "runner" },
  });
  return `Bearer ci:42:job-token-${jobId}`;
}

const jobExtra = (jobId: number, projectId: number) => ({
  "agent.gitlab.com/id": ["42"],
  "agent.gitlab.com/config_project_id": ["7"],
  "agent.gitlab.com/project_id": [String(projectId)],
  "agent.gitlab.com/ci_pipeline_id": [String(jobId + 1000)],
  "agent.gitlab.com/ci_job_id": [String(jobId)],
  "agent.gitlab.com/username": ["runner"],
});

beforeAll(async () => {
  setup = await startKubeProxySetup(CONFIG, undefined, {
    seed: (gitlab) => {
      gitlab.addGroup({ id: 55, path: "group" });
      for (const [path, projectId] of Object.entries(PROJECT_IDS)) gitlab.addProject({ projectId, path });
      // alice: a Developer of group/job, which user_access lists.
      gitlab.addUser({ id: 11, username: "alice" });
      gitlab.addMember(11, { projectId: 100 }, "developer");
    },
  });
  kube = setup.kube;
  kube.store.create("pods", "default", {
    metadata: { name: "web" },
    spec: { containers: [{ name: "main", image: "busybox" }] },
    status: { phase: "Running" },
  });
  const userAuth = (accessType: "personal_access_token" | "session_cookie", csrfToken?: string) => ({
    id: 11,
    username: "alice",
    accessType,
    ...(csrfToken !== undefined && { csrfToken }),
  });
  setup.gitlab.addProxyUser("pat-alice", userAuth("personal_access_token"));
  setup.gitlab.addProxyUser("session-alice", userAuth("session_cookie", "csrf-alice"));
  const alice = (accessType: string): UserInfo => ({
    username: "gitlab:user:alice",
    groups: ["gitlab:user", ...["guest", "reporter", "developer"].map((r) => `gitlab:project_role:100:${r}`)],
    extra: {
      "agent.gitlab.com/id": ["42"],
      "agent.gitlab.com/username": ["alice"],
      "agent.gitlab.com/access_type": [accessType],
      "agent.gitlab.com/config_project_id": ["7"],
    },
  });
  callers = [
    {
      name: "CI job, access_as ci_job",
      credentials: [["Authorization", job(601, 100, "group/job")]],
      expected: {
        username: "gitlab:ci_job:601",
        groups: ["gitlab:ci_job", "gitlab:group:55", "gitlab:project:100"],
        extra: jobExtra(601, 100),
      },
    },
    {
      name: "CI job, access_as ci_user",
      credentials: [["Authorization", job(602, 101, "group/ci-user")]],
      expected: {
        username: "gitlab:user:runner",
        groups: ["gitlab:user", "gitlab:ci_job", "gitlab:group:55", "gitlab:project:101"],
        extra: jobExtra(602, 101),
      },
    },
    {
      name: "CI job, access_as impersonate",
      credentials: [["Authorization", job(603, 102, "group/deployer")]],
      expected: { username: "deployer", groups: ["ops", "dev"], extra: {} },
    },
    { name: "CI job, as the agent", credentials: [["Authorization", job(604, 103, "group/as-agent")]] },
    {
      name: "personal access token, access_as user",
      credentials: [["Authorization", "Bearer pat:42:pat-alice"]],
      expected: alice("personal_access_token"),
    },
    {
      name: "session cookie, access_as user",
      credentials: [
        ["Cookie", "_gitlab_kas=session-alice"],
        ["Gitlab-Agent-Id", "42"],
        ["X-Csrf-Token", "csrf-alice"],
      ],
      expected: alice("session_cookie"),
    },
    { name: "static agent token", credentials: [["Authorization", `Bearer ${TOKEN}`]] },
  ];
});
afterAll(async () => {
  await setup?.close();
});

/** Sends `lines` (header lines after the request line) as is over TLS to kas's proxy and returns its status. */
async function send(requestLine: string, lines: [string, string][], body = ""): Promise<number> {
  const head = [requestLine, "Host: kas.test", ...lines.map(([n, v]) => `${n}: ${v}`)].join("\r\n");
  const port = Number(new URL(setup.kas.addresses.kubernetesApi).port);
  const answer = await rawExchange(port, `${head}\r\n\r\n${body}`, 10_000, { ca: setup.caCert });
  return answer.status;
}

/** The API server's record of the request tagged `probe`, if it got there. */
const recorded = (probe: string): RecordedRequest | undefined =>
  kube.requests.find((r) => r.headers["x-probe"] === probe);

/** Exactly `expected` (or agentk's own identity): never part of it, never the client's. */
function expectIdentity(r: RecordedRequest, expected: UserInfo | undefined): void {
  if (expected === undefined) {
    expect(r.rawHeaders.filter((_, i) => i % 2 === 0 && /^impersonate-/i.test(r.rawHeaders[i]!))).toEqual([]);
  } else {
    expect(r.impersonation).toEqual(expected);
  }
  expect(r.headers.authorization).toBe(`Bearer ${kube.token}`);
  expect(r.headers.cookie).toBeUndefined();
}

let probes = 0;
const nextProbe = () => `p${++probes}`;

const EXEC = "GET /api/v1/namespaces/default/pods/web/exec?command=true&stdout=1 HTTP/1.1";
const PORTFORWARD = "POST /api/v1/namespaces/default/pods/web/portforward HTTP/1.1";
const LIST = "GET /api/v1/namespaces/default/pods HTTP/1.1";

describe("a client's Connection header cannot strip kas's identity", () => {
  // What stripped it before: the client named kas's headers as hop-by-hop, kas passed that
  // Connection on with the Upgrade, and agentk's forwarder dropped what it named.
  const naming =
    "Upgrade, Impersonate-User, impersonate-group,IMPERSONATE-EXTRA-agent.gitlab.com%2Fid, Kas-Identity";

  test.each([
    ["exec (WebSocket)", EXEC, "websocket"],
    ["port-forward (SPDY)", PORTFORWARD, "SPDY/3.1"],
  ])("%s: every caller is seen as kas decided", async (_what, requestLine, upgrade) => {
    for (const caller of callers) {
      const probe = nextProbe();
      const status = await send(requestLine, [
        ...caller.credentials,
        ["Connection", naming],
        ["Upgrade", upgrade],
        ["Sec-WebSocket-Version", "13"],
        ["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="],
        ["Sec-WebSocket-Protocol", "v5.channel.k8s.io"],
        ["X-Stream-Protocol-Version", "portforward.k8s.io"],
        ["X-Probe", probe],
      ]);
      expect(status, caller.name).toBe(101);
      const r = recorded(probe);
      expect(r, caller.name).toBeDefined();
      expectIdentity(r!, caller.expected);
    }
  });

  test("a plain request the same", async () => {
    for (const caller of callers) {
      const probe = nextProbe();
      const status = await send(LIST, [
        ...caller.credentials,
        ["Connection", `keep-alive, ${naming}`],
        ["X-Probe", probe],
      ]);
      expect(status, caller.name).toBe(200);
      expectIdentity(recorded(probe)!, caller.expected);
    }
  });

  test("a forged Kas-Identity from the client never reaches agentk: its identity is kas's", async () => {
    const forged = encodeIdentity({ as: "agent" });
    const admin = encodeIdentity({
      as: "impersonate",
      who: { username: "admin", groups: ["system:masters"], extra: [] },
    });
    for (const caller of callers) {
      for (const value of [forged, admin]) {
        const probe = nextProbe();
        const status = await send(EXEC, [
          ...caller.credentials,
          ["Kas-Identity", value],
          ["Connection", "Upgrade"],
          ["Upgrade", "SPDY/3.1"],
          ["X-Probe", probe],
        ]);
        expect(status, caller.name).toBe(101);
        expectIdentity(recorded(probe)!, caller.expected);
      }
    }
  });
});

describe("paths", () => {
  test("dot segments and encoded separators are refused (400) and never reach the API server", async () => {
    const before = kube.requests.length;
    for (const path of [
      "/api/../../c-other/api",
      "/%2e%2e/c-other/api",
      "/api/./v1/pods",
      "/api%2Fv1",
      "/api/v1/namespaces/default/pods/web/exec/..",
    ]) {
      for (const caller of callers.slice(0, 2)) {
        expect(await send(`GET ${path} HTTP/1.1`, caller.credentials), path).toBe(400);
      }
    }
    // agentk's own leader-election lease renewals may land meanwhile; nothing else may.
    const reached = kube.requests.slice(before).filter((r) => !r.path.includes("/leases/"));
    expect(reached.map((r) => `${r.method} ${r.path}`)).toEqual([]);
  });
});

describe("the real kubectl, behind a client stack that names kas's headers in Connection", () => {
  test("exec, get -w and port-forward as the CI job kas impersonates", async () => {
    const proxy = await startConnectionNamingProxy(setup.kas.addresses.kubernetesApi, setup.caCert, [
      "Impersonate-User",
      "Impersonate-Group",
      "Impersonate-Extra-agent.gitlab.com%2Fci_job_id",
      "Kas-Identity",
    ]);
    const kubectl = await kubectlFor({
      writeKubeconfig: (path) =>
        writeKubeconfig(path, {
          server: proxy.url,
          caCert: setup.caCert,
          token: job(611, 100, "group/job").slice("Bearer ".length),
          namespace: "default",
        }),
    });
    const asJob: UserInfo = {
      username: "gitlab:ci_job:611",
      groups: ["gitlab:ci_job", "gitlab:group:55", "gitlab:project:100"],
      extra: jobExtra(611, 100),
    };
    const fromKubectl = () => kube.requests.filter((r) => r.headers["user-agent"]?.startsWith("kubectl"));
    try {
      const before = fromKubectl().length;
      const exec = await kubectl.run(["exec", "web", "--", "echo", "as", "the", "job"]);
      expect(exec, exec.stderr).toMatchObject({ code: 0, stdout: "as the job\n" });
      const upgrade = kube.requests.findLast((r) => r.path.includes("/pods/web/exec"));
      expect(upgrade?.impersonation).toEqual(asJob);

      const watch = kubectl.start(["get", "pods", "-w", "--output-watch-events"]);
      try {
        await watch.line(/web/);
        kube.store.create("pods", "default", {
          metadata: { name: "watched" },
          spec: { containers: [{ name: "main", image: "busybox" }] },
          status: { phase: "Pending" },
        });
        await watch.line(/ADDED\s+watched/);
      } finally {
        await watch.stop();
      }
      const watched = kube.requests.findLast((r) => r.path.includes("watch=true"));
      expect(watched?.impersonation).toEqual(asJob);

      const forward = kubectl.start(["port-forward", "pod/web", ":80"]);
      try {
        const local = Number(
          /127\.0\.0\.1:(\d+)/.exec(await forward.line(/Forwarding from 127\.0\.0\.1:\d+/))![1],
        );
        const conn = connect(local, "127.0.0.1");
        const [greeting] = (await once(conn, "data", { signal: AbortSignal.timeout(10_000) })) as [Buffer];
        expect(greeting.toString()).toBe("port-forward default/web:80\n");
        conn.destroy();
      } finally {
        await forward.stop();
      }
      const forwarded = kube.requests.findLast((r) => r.path.includes("/pods/web/portforward"));
      expect(forwarded?.impersonation).toEqual(asJob);
      const seen = fromKubectl().slice(before);
      expect(seen.length).toBeGreaterThan(2);
      for (const r of seen) expectIdentity(r, asJob);
    } finally {
      await kubectl.close();
      await proxy.close();
    }
  });
});

// ---- The property: any request, any caller ----

const HEADER_POOL = [
  "accept",
  "x-custom",
  "x-trace-id",
  "user-agent",
  "content-type",
  "impersonate-user",
  "impersonate-group",
  "impersonate-uid",
  "impersonate-extra-scopes",
  "authorization",
  "cookie",
  "kas-identity",
  "gitlab-agent-id",
  "x-csrf-token",
  "keep-alive",
  "te",
  "trailer",
  "proxy-authorization",
  "proxy-connection",
  "expect",
];
const HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "expect",
  "host",
]);
const CREDENTIAL = new Set(["authorization", "cookie", "gitlab-agent-id", "x-csrf-token", "kas-identity"]);

/** A name in any case. */
const casedName = (names: fc.Arbitrary<string>) =>
  fc
    .tuple(names, fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }))
    .map(([name, upper]) => [...name].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join(""));
// Any name but the test's own tag.
const headerName = casedName(
  fc.oneof(fc.constantFrom(...HEADER_POOL), fc.stringMatching(/^x-[a-z0-9]{1,8}$/)),
).filter((n) => n.toLowerCase() !== "x-probe");
const headerValue = fc.stringMatching(/^[!-~]([ -~]{0,30}[!-~])?$/).filter((v) => !v.includes(","));

const clientRequest = fc.record({
  caller: fc.nat(),
  upgrade: fc.option(fc.constantFrom("websocket", "SPDY/3.1", "h2c", "WebSocket"), { nil: undefined }),
  headers: fc.array(fc.tuple(headerName, headerValue), { maxLength: 10 }),
  // Connection: names in any case, repeated, comma-spaced, over one or two lines.
  connection: fc.array(fc.array(headerName, { maxLength: 4 }), { maxLength: 2 }),
  separator: fc.constantFrom(",", ", ", " ,  ", ",,"),
  framing: fc.constantFrom("none", "content-length", "chunked", "both"),
});

describe("property: what reaches the API server is kas's identity plus the client's end-to-end headers", () => {
  test("any client request, for each kind of credential and access_as", async () => {
    await fc.assert(
      fc.asyncProperty(clientRequest, async (c) => {
        const caller = callers[c.caller % callers.length]!;
        const probe = nextProbe();
        const lines: [string, string][] = [...caller.credentials];
        for (const [name, value] of c.headers) {
          // A second credential would make a different caller: keep the caller's own.
          if (/^(authorization|cookie|gitlab-agent-id|x-csrf-token)$/i.test(name)) continue;
          lines.push([name, name.toLowerCase() === "expect" ? "100-continue" : value]);
        }
        for (const names of c.connection) lines.push(["Connection", ["Upgrade", ...names].join(c.separator)]);
        if (c.upgrade !== undefined) {
          lines.push(["Upgrade", c.upgrade]);
          if (c.connection.length === 0) lines.push(["Connection", "Upgrade"]);
        }
        const body = "hello";
        if (c.framing === "content-length" || c.framing === "both") lines.push(["Content-Length", "5"]);
        if (c.framing === "chunked" || c.framing === "both") lines.push(["Transfer-Encoding", "chunked"]);
        lines.push(["X-Probe", probe]);
        const upgrade = c.upgrade !== undefined;
        const requestLine = upgrade
          ? EXEC
          : c.framing === "none"
            ? LIST
            : "POST /api/v1/namespaces/default/configmaps HTTP/1.1";
        const payload =
          c.framing === "chunked" || c.framing === "both"
            ? "5\r\nhello\r\n0\r\n\r\n"
            : c.framing === "content-length"
              ? body
              : "";
        const status = await send(requestLine, lines, payload);

        const r = recorded(probe);
        const clientImpersonates = lines.some(([n]) => /^impersonate-/i.test(n));
        if (c.framing === "both") {
          // Both framings: node:http refuses the request (smuggling), before anything is proxied.
          expect(status).toBe(400);
          expect(r).toBeUndefined();
          return;
        }
        if (caller.expected !== undefined && clientImpersonates) {
          // kas impersonates: a client that asks for its own identity is refused outright.
          expect(status).toBe(403);
          expect(r).toBeUndefined();
          return;
        }
        expect(r, `status ${status}`).toBeDefined();
        expectIdentity(r!, caller.expected);

        // The client's end-to-end lines, exactly, and nothing else beside kas's identity.
        const tokens = new Set(
          lines
            .filter(([n]) => n.toLowerCase() === "connection")
            .flatMap(([, v]) => v.split(","))
            .map((t) => t.trim().toLowerCase())
            .filter(Boolean),
        );
        const endToEnd = (name: string) =>
          !HOP.has(name) &&
          !tokens.has(name) &&
          !CREDENTIAL.has(name) &&
          !name.startsWith("impersonate-") &&
          name !== "content-length";
        const sent = lines
          .map(([n, v]) => [n.toLowerCase(), v] as const)
          .filter(([n]) => endToEnd(n))
          .map(([n, v]) => `${n}: ${v}`)
          .sort();
        const arrived: string[] = [];
        for (let i = 0; i < r!.rawHeaders.length; i += 2) {
          const name = r!.rawHeaders[i]!.toLowerCase();
          if (name === "authorization" || name.startsWith("impersonate-")) continue; // checked above
          if (HOP.has(name) || name === "content-length") continue; // each hop's own framing
          arrived.push(`${name}: ${r!.rawHeaders[i + 1]}`);
        }
        expect(arrived.sort()).toEqual(sent);
        if (upgrade) {
          expect(r!.headers.upgrade).toBe(c.upgrade);
          // kas writes Connection itself: nothing of the client's list travels on.
          expect(r!.headers.connection?.toLowerCase()).toBe("upgrade");
          expect(r!.headers["content-length"]).toBeUndefined();
        }
      }),
      { numRuns: 150 },
    );
  }, 120_000);
});
