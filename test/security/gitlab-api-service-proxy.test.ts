// GitLab's service proxy (`/api/v1/agents/{id}/services/{name}/...` on kas's API, 8153) as an
// attacker with GitLab's JWT sees it: it reaches the agent's allow-listed services only, never the
// Kubernetes API, which is served through the Kubernetes API proxy under its credential and
// impersonation rules alone.
import { afterAll, beforeAll, expect, test } from "vitest";
import { parseServiceSpec } from "../../modules/service_proxy/agentk/allowed-services.ts";
import { gitlabJwt } from "../kas/support/fixtures.ts";
import { type KubeProxySetup, startKubeProxySetup } from "../support/kube-proxy-setup.ts";
import { rawExchange } from "../support/raw-http.ts";

let setup: KubeProxySetup;
let jwt: string;
beforeAll(async () => {
  setup = await startKubeProxySetup({});
  jwt = await gitlabJwt(setup.kas.apiSecret);
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
      headers: { "gitlab-kas-api-request": jwt },
    });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: string }).error).toContain("Kubernetes API proxy");
  }
  const port = Number(new URL(setup.kas.addresses.api!).port);
  const upgrade = await rawExchange(
    port,
    `GET /api/v1/agents/42/services/${name}/api/v1/namespaces/default/pods/web/exec?command=sh HTTP/1.1\r\n` +
      `host: kas\r\ngitlab-kas-api-request: ${jwt}\r\nconnection: upgrade\r\nupgrade: SPDY/3.1\r\n\r\n`,
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
