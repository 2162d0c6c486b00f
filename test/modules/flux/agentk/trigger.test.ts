// Where agentk calls a Receiver (flux.webhook_receiver_url + its webhook path), and what counts as done.
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { afterEach, describe, expect, test } from "vitest";
import { ReceiverTrigger, TriggerError } from "../../../../modules/flux/agentk/trigger.ts";

function kubeConfig(server: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "c", server, skipTLSVerify: true }],
    users: [{ name: "u", token: "t0ken" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  return kc;
}

const servers: ReturnType<typeof createServer>[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

async function receiverServer(status: number, seen: IncomingMessage[]): Promise<string> {
  const server = createServer((req, res) => {
    seen.push(req);
    req.resume();
    res.writeHead(status).end();
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe("ReceiverTrigger", () => {
  const kc = kubeConfig("https://kube.example:6443/prefix");

  test("a plain URL: the webhook path under it", () => {
    const t = new ReceiverTrigger("http://webhook-receiver.flux-system.svc.cluster.local/base/", kc);
    expect(t.urlOf("/hook/abc").href).toBe(
      "http://webhook-receiver.flux-system.svc.cluster.local/base/hook/abc",
    );
  });

  test("a service proxy path: through the Kubernetes API server of agentk's configuration", () => {
    const t = new ReceiverTrigger(
      "/api/v1/namespaces/flux-system/services/http:webhook-receiver:80/proxy",
      kc,
    );
    expect(t.urlOf("/hook/abc").href).toBe(
      "https://kube.example:6443/prefix/api/v1/namespaces/flux-system/services/http:webhook-receiver:80/proxy/hook/abc",
    );
  });

  test("neither a URL nor a service proxy path, or not HTTP: a clear error", () => {
    expect(() => new ReceiverTrigger("webhook-receiver", kc)).toThrow(TriggerError);
    expect(() => new ReceiverTrigger("ftp://x/", kc)).toThrow(/ftp: is not http: or https:/);
  });

  test("a POST to the receiver; anything but 200 is a failure", async () => {
    const seen: IncomingMessage[] = [];
    const ok = new ReceiverTrigger(await receiverServer(200, seen), kc);
    await ok.trigger("/hook/abc", AbortSignal.timeout(5000));
    expect(seen.map((r) => [r.method, r.url])).toEqual([["POST", "/hook/abc"]]);
    // No credentials of agentk's go to a receiver outside the Kubernetes API.
    expect(seen[0]!.headers.authorization).toBeUndefined();
    const missing = new ReceiverTrigger(await receiverServer(404, seen), kc);
    await expect(missing.trigger("/hook/abc", AbortSignal.timeout(5000))).rejects.toThrow(/answered 404/);
  });
});
