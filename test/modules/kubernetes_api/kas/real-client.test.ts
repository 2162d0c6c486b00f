import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, KubeConfig, Watch } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TOKEN } from "../../../kas/support/fixtures.ts";
import { type InProcessKas, startInProcessKas } from "../../../kas/support/in-process.ts";
import { type InProcessAgentk, startInProcessAgentk } from "../../../support/agentk-in-process.ts";
import { type KubeApiServer, startKubeApiServer } from "../../../support/kube-apiserver.ts";

// @kubernetes/client-node -> kas's proxy -> tunnel -> agentk's Kubernetes API half -> the Kubernetes test server.
describe("Kubernetes API proxy driven through the real client", () => {
  let kube: KubeApiServer;
  let kas: InProcessKas;
  let agent: InProcessAgentk;
  let kc: KubeConfig;
  let dir: string;

  beforeAll(async () => {
    kube = await startKubeApiServer();
    kas = await startInProcessKas();
    dir = await mkdtemp(join(tmpdir(), "kubeconfig-"));
    agent = await startInProcessAgentk({
      kasUrl: kas.addresses.agent,
      token: TOKEN,
      kubernetes: await kube.writeKubeconfig(join(dir, "kubeconfig")),
    });
    await agent.agent.client.ready(5000);
    kc = new KubeConfig();
    kc.loadFromOptions({
      // client-node refuses a plain-http server unless told to skip TLS verification.
      clusters: [{ name: "kas", server: kas.addresses.kubernetesApi, skipTLSVerify: true }],
      users: [{ name: "dev", token: TOKEN }],
      contexts: [{ name: "kas", cluster: "kas", user: "dev" }],
      currentContext: "kas",
    });
  });
  afterAll(async () => {
    await agent.stop();
    await rm(dir, { recursive: true, force: true });
    await kas.close();
    await kube.close();
  });

  it("lists namespaces; the API server sees the agent's credentials, not the caller's", async () => {
    const list = await kc.makeApiClient(CoreV1Api).listNamespace();
    expect(list.items.map((n) => n.metadata?.name).sort()).toEqual(["default", "kube-system"]);
    expect(kube.requests.at(-1)?.headers.authorization).toBe(`Bearer ${kube.token}`);
  });

  it("a watch streams events as they happen", async () => {
    const events: string[] = [];
    let seen!: () => void;
    const got = new Promise<void>((resolve) => {
      seen = resolve;
    });
    const list = await kc.makeApiClient(CoreV1Api).listNamespace();
    const req = await new Watch(kc).watch(
      "/api/v1/namespaces",
      { resourceVersion: list.metadata?.resourceVersion },
      (type, obj: { metadata: { name: string } }) => {
        events.push(`${type} ${obj.metadata.name}`);
        if (events.length === 1) seen();
      },
      () => {},
    );
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: "watched" } } });
    await got;
    expect(events).toEqual(["ADDED watched"]);
    req.abort();
  });

  it("exec: the Upgrade reaches the API server and bytes flow both ways", async () => {
    await kc.makeApiClient(CoreV1Api).createNamespacedPod({
      namespace: "default",
      body: { metadata: { name: "p" }, spec: { containers: [{ name: "c", image: "x" }] } },
    });
    const socket = connect(Number(new URL(kas.addresses.kubernetesApi).port), "127.0.0.1");
    await once(socket, "connect");
    socket.write(
      `POST /api/v1/namespaces/default/pods/p/exec?command=sh HTTP/1.1\r\nhost: kas\r\nauthorization: Bearer ${TOKEN}\r\nconnection: Upgrade\r\nupgrade: SPDY/3.1\r\n\r\n`,
    );
    let got = "";
    socket.on("data", (c) => {
      got += c;
    });
    while (!got.includes("exec default/p\n")) await once(socket, "data");
    expect(got).toMatch(/^HTTP\/1.1 101 /);
    got = "";
    socket.write("ls\n");
    while (got !== "ls\n") await once(socket, "data");
    socket.end();
  });
});
