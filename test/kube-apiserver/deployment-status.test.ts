// Deployment status the tests drive: the server plays the Deployment controller on demand
// (`setDeploymentReady`), and real kubectl reads it the way GitOps checks do (`rollout status`,
// `wait --for=condition=Available`, the READY column).
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { stringify } from "yaml";
import { type Kubectl, kubectlFor } from "../support/kube/kubectl.ts";
import { type KubeApiServer, startKubeApiServer } from "../support/kube-apiserver.ts";
import { until } from "../support/until.ts";

let api: KubeApiServer;
let kubectl: Kubectl;
beforeAll(async () => {
  api = await startKubeApiServer();
  kubectl = await kubectlFor(api);
});
afterAll(async () => {
  await kubectl?.close();
  await api?.close();
});

async function ok(args: string[], input?: string): Promise<string> {
  const r = await kubectl.run(args, input === undefined ? {} : { input });
  expect(r.code, `kubectl ${args.join(" ")}: ${r.stderr}`).toBe(0);
  return r.stdout;
}

const manifest = (name: string, replicas: number, image: string) =>
  stringify({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: "default" },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "app", image }] } },
    },
  });

describe("Deployment status driven by the test", () => {
  test("ready and not ready: the fields a rollout check reads", async () => {
    await ok(["apply", "--server-side", "-f", "-"], manifest("fields", 3, "a:1"));
    const ready = api.setDeploymentReady("default", "fields", true);
    expect(ready.status).toMatchObject({
      observedGeneration: 1,
      replicas: 3,
      updatedReplicas: 3,
      readyReplicas: 3,
      availableReplicas: 3,
      conditions: [
        { type: "Available", status: "True", reason: "MinimumReplicasAvailable" },
        { type: "Progressing", status: "True", reason: "NewReplicaSetAvailable" },
      ],
    });
    const notReady = api.setDeploymentReady("default", "fields", false);
    expect(notReady.status).toMatchObject({ replicas: 3, updatedReplicas: 3, unavailableReplicas: 3 });
    expect(notReady.status).not.toHaveProperty("readyReplicas");
    expect((notReady.status as { conditions: unknown[] }).conditions[0]).toMatchObject({
      type: "Available",
      status: "False",
      reason: "MinimumReplicasUnavailable",
    });
    expect(api.setDeploymentReady("default", "fields", 2).status).toMatchObject({
      readyReplicas: 2,
      unavailableReplicas: 1,
    });
    const row = (await ok(["get", "deploy", "fields", "--no-headers"])).split(/\s+/);
    expect(row.slice(0, 4)).toEqual(["fields", "2/3", "3", "2"]);
    // The status is the controller's: a client's write to the main resource leaves it alone.
    const json = JSON.parse(await ok(["get", "deploy", "fields", "-o", "json"]));
    json.status = { readyReplicas: 99 };
    await ok(["replace", "-f", "-"], JSON.stringify(json));
    expect(api.store.get("deployments", "default", "fields").status).toMatchObject({ readyReplicas: 2 });
    // ...and a write to the status subresource leaves the spec alone.
    await ok([
      "patch",
      "deploy",
      "fields",
      "--subresource=status",
      "--type=merge",
      "-p",
      '{"status":{"readyReplicas":1},"spec":{"replicas":9}}',
    ]);
    const patched = api.store.get("deployments", "default", "fields");
    expect(patched.status).toMatchObject({ readyReplicas: 1 });
    expect(patched.spec).toMatchObject({ replicas: 3 });
  });

  test("kubectl rollout status waits for the rollout and returns once the test marks it ready", async () => {
    await ok(["apply", "--server-side", "-f", "-"], manifest("web", 2, "web:1"));
    api.setDeploymentReady("default", "web", false);
    const rollout = kubectl.start(["rollout", "status", "deployment/web", "--timeout=30s"]);
    try {
      await rollout.line(
        /Waiting for deployment "web" rollout to finish: 0 of 2 updated replicas are available/,
      );
      api.setDeploymentReady("default", "web", true);
      await rollout.line('deployment "web" successfully rolled out');
      expect((await rollout.exited()).code).toBe(0);
    } finally {
      await rollout.stop();
    }

    // A new spec is a new generation the controller has not observed: not rolled out until marked again.
    await ok(["apply", "--server-side", "-f", "-"], manifest("web", 2, "web:2"));
    expect(api.store.get("deployments", "default", "web").metadata.generation).toBe(2);
    const again = kubectl.start(["rollout", "status", "deployment/web", "--timeout=30s"]);
    try {
      await again.line("Waiting for deployment spec update to be observed");
      api.setDeploymentReady("default", "web", true);
      await again.line('deployment "web" successfully rolled out');
    } finally {
      await again.stop();
    }
  });

  test("kubectl wait --for=condition=Available", async () => {
    await ok(["apply", "--server-side", "-f", "-"], manifest("waited", 1, "w:1"));
    api.setDeploymentReady("default", "waited", false);
    const wait = kubectl.start(["wait", "--for=condition=Available", "deployment/waited", "--timeout=30s"]);
    try {
      // kubectl has seen it unavailable and watches it (by name) for the condition.
      const watching = () =>
        api.requests.some((r) => r.path.includes("watch=true") && r.path.includes("metadata.name%3Dwaited"));
      await until(watching, 15_000, "kubectl wait to watch the deployment");
      expect(wait.lines).toEqual([]);
      api.setDeploymentReady("default", "waited", true);
      await wait.line("deployment.apps/waited condition met");
      expect((await wait.exited()).code).toBe(0);
    } finally {
      await wait.stop();
    }
  });
});
