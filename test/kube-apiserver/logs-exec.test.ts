// kubectl logs -f and kubectl exec (WebSocket, kubectl's default) against the test server.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type Kubectl, kubectlFor } from "../support/kube/kubectl.ts";
import { type KubeApiServer, startKubeApiServer } from "../support/kube-apiserver.ts";

let api: KubeApiServer;
let kubectl: Kubectl;
beforeAll(async () => {
  api = await startKubeApiServer();
  kubectl = await kubectlFor(api);
  api.store.create("pods", "default", {
    metadata: { name: "app" },
    spec: { containers: [{ name: "main", image: "busybox" }] },
    status: { phase: "Running" },
  });
});
afterAll(async () => {
  await kubectl?.close();
  await api?.close();
});

describe("kubectl logs and exec", () => {
  test("logs -f: what was logged, then each new line as it is appended", async () => {
    api.appendLog("default", "app", "booting");
    const logs = kubectl.start(["logs", "-f", "app"]);
    try {
      await logs.line("booting");
      api.appendLog("default", "app", "listening on :8080");
      await logs.line("listening on :8080");
      expect(logs.lines).toEqual(["booting", "listening on :8080"]);
    } finally {
      await logs.stop();
    }
    const once = await kubectl.run(["logs", "app"]);
    expect(once.stdout).toBe("booting\nlistening on :8080\n");
    const missing = await kubectl.run(["logs", "nobody"]);
    expect(missing.stderr).toContain('pods "nobody" not found');
  });

  test("exec over WebSocket: output, stdin, exit codes", async () => {
    expect(await kubectl.run(["exec", "app", "--", "echo", "hello", "world"])).toMatchObject({
      code: 0,
      stdout: "hello world\n",
    });
    expect((await kubectl.run(["exec", "app", "--", "hostname"])).stdout).toBe("app\n");
    expect(
      await kubectl.run(["exec", "-i", "app", "--", "cat"], { input: "line one\nline two\n" }),
    ).toMatchObject({
      code: 0,
      stdout: "line one\nline two\n",
    });
    const failed = await kubectl.run(["exec", "app", "--", "sh", "-c", "exit 3"]);
    expect(failed.code).toBe(3);
    expect(failed.stderr).toContain("command terminated with exit code 3");
    const unknown = await kubectl.run(["exec", "app", "--", "frobnicate"]);
    expect(unknown.code).toBe(127);
    expect(unknown.stderr).toContain("frobnicate: not found");
    const exec = api.requests.findLast((r) => r.path.includes("/pods/app/exec"));
    expect(exec?.headers.upgrade?.toLowerCase()).toBe("websocket");
    expect(exec?.headers["sec-websocket-protocol"]).toContain("v5.channel.k8s.io");
  });
});
