// The client leaving while kas's Kubernetes API proxy waits for its authorization (GitLab asked)
// stops that wait, and nothing is forwarded. The AbortSignal for it is made only when a wait asks
// for it (Leaving): aborted at once if the client had already left.
import { afterEach, describe, expect, it } from "vitest";
import { Router } from "../../../../lib/router/index.ts";
import { Leaving, serveKubernetesProxy } from "../../../../modules/kubernetes_api/kas/proxy-server.ts";
import { signalOf } from "../../../../tool/gitlab/index.ts";
import { AgentHttpProxy } from "../../../../tool/http/proxy/index.ts";

describe("Leaving", () => {
  it("a signal made before the client leaves aborts when it does; one made after is aborted already; one per request", () => {
    const early = new Leaving();
    const signal = early.signal();
    expect(signal.aborted).toBe(false);
    expect(early.left).toBe(false);
    early.leave();
    expect(signal.aborted).toBe(true);
    expect(early.left).toBe(true);
    expect(early.signal()).toBe(signal);

    const late = new Leaving();
    late.leave();
    expect(late.left).toBe(true);
    expect(late.signal().aborted).toBe(true);
  });
});

describe("Kubernetes API proxy: the client leaves during authorization", () => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  it("the wait for the authorization is aborted; nothing reaches the agent", async () => {
    const router = await new Router({}).start();
    cleanup.push(() => router.close());
    const agentProxy = new AgentHttpProxy(router, { dialTimeoutMs: 100 });
    cleanup.push(() => agentProxy.destroy());
    let forwarded = 0;
    const forward = agentProxy.forward.bind(agentProxy);
    agentProxy.forward = (...args) => {
      forwarded++;
      return forward(...args);
    };
    let asked!: () => void;
    const authorizing = new Promise<void>((resolve) => {
      asked = resolve;
    });
    let aborted = false;
    const front = await serveKubernetesProxy({
      listen: { address: { host: "127.0.0.1", port: 0 } },
      // As a wait for GitLab does: it takes the signal and fails when it aborts.
      authorize: (_req, leaving) =>
        new Promise((_resolve, reject) => {
          const signal = signalOf(leaving);
          signal.addEventListener("abort", () => {
            aborted = true;
            reject(signal.reason);
          });
          asked();
        }),
      proxy: agentProxy,
    });
    cleanup.push(() => front.close(0));
    const client = new AbortController();
    const request = fetch(`${front.url}/api/v1/namespaces`, { signal: client.signal }).catch(() => "left");
    await authorizing;
    client.abort();
    expect(await request).toBe("left");
    await expect.poll(() => aborted).toBe(true);
    expect(forwarded).toBe(0);
  });
});
