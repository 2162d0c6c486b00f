// GitLab's service proxy (`/api/v1/agents/{id}/services/{name}/...` on kas's API, 8153) as an
// attacker with GitLab's JWT sees it: it reaches the agent's allow-listed services only, never the
// Kubernetes API, which is served through the Kubernetes API proxy under its credential and
// impersonation rules alone.
import type { Server } from "node:http";
import { createServer, type Server as NetServer } from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { parseServiceSpec } from "../../modules/service_proxy/agentk/allowed-services.ts";
import { gitlabJwt, TOKEN } from "../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../support/agentk-in-process.ts";
import { type KubeProxySetup, startKubeProxySetup } from "../support/kube-proxy-setup.ts";
import { rawExchange } from "../support/raw-http.ts";

let setup: KubeProxySetup;
let apiJwt: string;
beforeAll(async () => {
  setup = await startKubeProxySetup({});
  apiJwt = await gitlabJwt(setup.kas.apiSecret);
});
afterAll(async () => {
  await setup?.close();
});

test.each([
  "kubernetes",
  "kuberne%74es", // percent-encoded: decoded before the check
])("the service named %s is not the cluster's API: 404, and nothing reaches the API server", async (name) => {
  const before = setup.kube.requests.length;
  for (const path of ["/api/v1/namespaces", "/apis/rbac.authorization.k8s.io/v1/clusterroles", "/version"]) {
    const res = await fetch(`${setup.kas.addresses.api}/api/v1/agents/42/services/${name}${path}`, {
      headers: { "gitlab-kas-api-request": apiJwt },
    });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: string }).error).toContain("Kubernetes API proxy");
  }
  const port = Number(new URL(setup.kas.addresses.api!).port);
  const upgrade = await rawExchange(
    port,
    `GET /api/v1/agents/42/services/${name}/api/v1/namespaces/default/pods/web/exec?command=sh HTTP/1.1\r\n` +
      `host: kas\r\ngitlab-kas-api-request: ${apiJwt}\r\nconnection: upgrade\r\nupgrade: SPDY/3.1\r\n\r\n`,
  );
  expect(upgrade.status).toBe(404);
  expect(setup.kube.requests.length).toBe(before);
});

test("agentk refuses to allow-list a service under the Kubernetes API's name", () => {
  expect(() => parseServiceSpec("kubernetes=https://kubernetes.default.svc")).toThrow(
    /reserved for the Kubernetes API/,
  );
  expect(parseServiceSpec("prometheus=http://prometheus:9090").name).toBe("prometheus");
});

describe("an allow-listed service that answers what node:http's server would refuse to write", () => {
  let kas: InProcessKas;
  let agent: InProcessAgentk;
  let jwt: string;
  const answers: Record<string, string> = {
    low: "HTTP/1.1 099 X\r\nContent-Length: 0\r\n\r\n",
    zero: "HTTP/1.1 000 X\r\nContent-Length: 0\r\n\r\n",
    reason: "HTTP/1.1 200 o\x01k\r\nContent-Length: 2\r\n\r\nok",
  };
  const servers: NetServer[] = [];
  beforeAll(async () => {
    const services: Record<string, Server> = {};
    for (const [name, answer] of Object.entries(answers)) {
      const server = createServer((s) => s.once("data", () => s.end(answer)));
      servers.push(server);
      // A raw TCP server where agentk expects an HTTP one: it only needs the port.
      services[name] = server as unknown as Server;
    }
    kas = await startInProcessKas();
    agent = await startInProcessAgentk({
      kasUrl: kas.addresses.agent,
      token: TOKEN,
      services: { ...services, good: (_req, res) => res.end("fine") },
    });
    await agent.agent.client.ready(5000);
    jwt = await gitlabJwt(kas.apiSecret);
  });
  afterAll(async () => {
    await agent?.stop();
    await kas?.close();
    for (const s of servers) s.close();
  });

  test("a bad status is a 502, a bad reason phrase is replaced; agentk serves on", async () => {
    const get = (name: string) =>
      fetch(`${kas.addresses.api}/api/v1/agents/42/services/${name}/metrics`, {
        headers: { "gitlab-kas-api-request": jwt },
        signal: AbortSignal.timeout(5000),
      });
    for (const name of ["low", "zero"]) expect((await get(name)).status, name).toBe(502);
    const reason = await get("reason");
    expect(reason.status).toBe(200);
    expect(reason.statusText).toBe("OK");
    expect(await reason.text()).toBe("ok");
    const good = await get("good");
    expect(await good.text()).toBe("fine");
  });
});
