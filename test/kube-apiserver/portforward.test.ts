// The real `kubectl port-forward` against the test server: SPDY/3.1 tunnelled through a WebSocket
// (kubectl's default since 1.31) and plain SPDY (its fallback), bytes through the local port to
// the pod's port and back, connections side by side, a pod port that refuses, a clean stop.
import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type Kubectl, type KubectlProcess, kubectlFor } from "../support/kube/kubectl.ts";
import type { PortTarget } from "../support/kube/portforward.ts";
import { type KubeApiServer, startKubeApiServer } from "../support/kube-apiserver.ts";
import { within } from "../support/until.ts";

let api: KubeApiServer;
let kubectl: Kubectl;
beforeAll(async () => {
  api = await startKubeApiServer();
  kubectl = await kubectlFor(api);
  api.store.create("pods", "default", {
    metadata: { name: "app" },
    spec: { containers: [{ name: "main", image: "busybox", ports: [{ containerPort: 8080 }] }] },
    status: { phase: "Running" },
  });
});
afterAll(async () => {
  await kubectl?.close();
  await api?.close();
});

/** The local port kubectl printed for `remote` ("Forwarding from 127.0.0.1:N -> remote"). */
async function localPort(pf: KubectlProcess, remote: number): Promise<number> {
  const line = await pf.line(new RegExp(`^Forwarding from 127\\.0\\.0\\.1:\\d+ -> ${remote}$`));
  return Number(/:(\d+) ->/.exec(line)![1]);
}

/** A TCP client of the local port that keeps what it received (bounded) and waits on it by events. */
class Client {
  readonly socket: Socket;
  received = Buffer.alloc(0);
  #ended = false;

  constructor(
    port: number,
    readonly limit = 64 * 1024,
  ) {
    this.socket = connect(port, "127.0.0.1");
    this.socket.on("data", (chunk: Buffer) => {
      if (this.received.length + chunk.length > this.limit)
        this.socket.destroy(new Error("received too much"));
      else this.received = Buffer.concat([this.received, chunk]);
    });
    this.socket.once("end", () => (this.#ended = true));
  }

  get text(): string {
    return this.received.toString();
  }

  /** Resolves once `done` holds of what was received, within `ms`. */
  async receive(done: (c: Client) => boolean, what: string, ms = 10_000): Promise<void> {
    let check = () => {};
    const wait = new Promise<void>((resolve, reject) => {
      check = () => {
        if (done(this)) resolve();
        else if (this.#ended) reject(new Error(`connection ended before ${what}: ${this.text}`));
      };
    });
    this.socket.on("data", check).on("end", check);
    check();
    try {
      await within(wait, ms, what);
    } catch (err) {
      throw new Error(`${(err as Error).message}; received ${JSON.stringify(this.text.slice(0, 200))}`);
    } finally {
      this.socket.off("data", check).off("end", check);
    }
  }

  /** Resolves when the far side closed the connection, within `ms`. */
  async ended(ms = 10_000): Promise<void> {
    if (!this.#ended) await within(once(this.socket, "end"), ms, "the connection to end");
  }
}

describe("kubectl port-forward", () => {
  test("over a WebSocket (the default): echo, two connections at once, a served port, a clean stop", async () => {
    const served: PortTarget[] = [];
    // A port that reads one line and answers it, then closes: the pod side ending a connection.
    api.servePort("default", "app", 9090, (conn, target) => {
      served.push(target);
      let line = "";
      conn.setEncoding("utf8").on("data", (chunk: string) => {
        line += chunk;
        if (line.includes("\n")) conn.end(`pong ${line}`);
      });
    });
    const pf = kubectl.start(["port-forward", "pod/app", "0:8080", "0:9090"]);
    try {
      const echo = await localPort(pf, 8080);
      const pong = await localPort(pf, 9090);

      const a = new Client(echo);
      const b = new Client(echo);
      const greeting = "port-forward default/app:8080\n";
      await a.receive((c) => c.text === greeting, "a's greeting");
      await b.receive((c) => c.text === greeting, "b's greeting");
      a.socket.write("from a\n");
      b.socket.write("from b\n");
      await a.receive((c) => c.text === `${greeting}from a\n`, "a's echo");
      await b.receive((c) => c.text === `${greeting}from b\n`, "b's echo");

      // a closes; b goes on, and carries a megabyte (many SPDY frames each way) intact.
      a.socket.end();
      await a.ended();
      const big = randomBytes(1024 * 1024);
      const sha = (buf: Buffer) => createHash("sha256").update(buf).digest("hex");
      const bigB = new Client(echo, 2 * 1024 * 1024);
      await bigB.receive((c) => c.text === greeting, "the greeting before the megabyte");
      bigB.socket.end(big);
      await bigB.ended();
      expect(bigB.received.length).toBe(greeting.length + big.length);
      expect(sha(bigB.received.subarray(greeting.length))).toBe(sha(big));
      b.socket.write("still here\n");
      await b.receive((c) => c.text.endsWith("still here\n"), "b's echo after the others left");

      const p = new Client(pong);
      p.socket.write("ping\n");
      await p.receive((c) => c.text === "pong ping\n", "the served port's answer");
      await p.ended(); // the pod side closed: kubectl closes the local connection too
      expect(served).toEqual([{ namespace: "default", pod: "app", port: 9090 }]);
      b.socket.end();
      await b.ended();

      pf.kill("SIGINT"); // Ctrl-C: kubectl closes its listeners and the connection, and exits 0
      expect((await pf.exited()).code).toBe(0);
    } finally {
      await pf.stop();
    }
    const upgrades = api.requests.filter((r) => r.path === "/api/v1/namespaces/default/pods/app/portforward");
    expect(upgrades.map((r) => [r.method, r.headers.upgrade])).toEqual([["GET", "websocket"]]);
    expect(upgrades[0]!.headers["sec-websocket-protocol"]).toBe("SPDY/3.1+portforward.k8s.io");
  });

  test("over plain SPDY (KUBECTL_PORT_FORWARD_WEBSOCKETS=false)", async () => {
    const before = api.requests.length;
    const pf = kubectl.start(["port-forward", "pod/app", "0:8080"], {
      env: { KUBECTL_PORT_FORWARD_WEBSOCKETS: "false" },
    });
    try {
      const c = new Client(await localPort(pf, 8080));
      c.socket.write("over spdy\n");
      await c.receive((r) => r.text === "port-forward default/app:8080\nover spdy\n", "the echo");
      c.socket.end();
      await c.ended();
      pf.kill("SIGINT");
      expect((await pf.exited()).code).toBe(0);
    } finally {
      await pf.stop();
    }
    const upgrade = api.requests.slice(before).find((r) => r.path.endsWith("/pods/app/portforward"));
    expect(upgrade).toMatchObject({
      method: "POST",
      headers: { upgrade: "SPDY/3.1", "x-stream-protocol-version": "portforward.k8s.io" },
    });
  });

  test("a port that refuses: its error reaches kubectl, which gives up as against a real cluster", async () => {
    api.servePort("default", "app", 5432, () => {
      throw new Error("dial tcp4 127.0.0.1:5432: connect: connection refused");
    });
    const pf = kubectl.start(["port-forward", "pod/app", "0:5432"]);
    try {
      const c = new Client(await localPort(pf, 5432));
      await c.ended();
      expect(c.text).toBe("");
      const result = await pf.exited();
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(
        "error forwarding port 5432 to pod app_default, uid : dial tcp4 127.0.0.1:5432: connect: connection refused",
      );
      expect(result.stderr).toContain("lost connection to pod");
    } finally {
      await pf.stop();
    }
  });

  test("a pod that does not exist is a 404 before any upgrade", async () => {
    const result = await kubectl.run(["port-forward", "pod/nobody", "0:8080"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('pods "nobody" not found');
  });
});
