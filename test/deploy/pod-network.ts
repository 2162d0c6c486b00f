// A pod network for the image test, as a cluster's CNI and kube-proxy make one, on this machine:
// a bridge with a /24 of its own, a network namespace per pod joined to it by a veth pair (each pod
// its own IP, pods reach each other and the test process directly), and Services as extra
// addresses on the bridge whose ports forward to the stand-ins on loopback. Needs root
// (CAP_NET_ADMIN); everything it makes is named with a random suffix and removed by `close()`.
import { execFile } from "node:child_process";
import { randomBytes, randomInt } from "node:crypto";
import { createConnection, createServer, type Server } from "node:net";
import { promisify } from "node:util";

const run = promisify(execFile);
const ip = (...args: string[]) => run("ip", args, { timeout: 10_000 });

export interface Pod {
  name: string;
  /** The network namespace, for `ip netns exec`. */
  netns: string;
  ip: string;
}

export class PodNetwork {
  readonly #suffix = randomBytes(3).toString("hex");
  readonly #bridge = `kasbr${this.#suffix}`;
  /** 10.X.Y.0/24, X in 200..249: away from the usual cluster and Docker ranges. */
  readonly #prefix = `10.${randomInt(200, 250)}.${randomInt(0, 256)}`;
  readonly #pods: Pod[] = [];
  readonly #servers: Server[] = [];
  #nextPod = 10;
  #nextService = 200;

  private constructor() {}

  /** The bridge's own address: the pods' gateway, where the test process answers them. */
  get gateway(): string {
    return `${this.#prefix}.1`;
  }

  static async create(): Promise<PodNetwork> {
    const net = new PodNetwork();
    await ip("link", "add", net.#bridge, "type", "bridge");
    await ip("addr", "add", `${net.gateway}/24`, "dev", net.#bridge);
    await ip("link", "set", net.#bridge, "up");
    return net;
  }

  /** A pod's network namespace, with an address of its own. */
  async addPod(name: string): Promise<Pod> {
    const pod = { name, netns: `kas-${this.#suffix}-${name}`, ip: `${this.#prefix}.${this.#nextPod++}` };
    const host = `kv${this.#suffix}${this.#pods.length}`;
    this.#pods.push(pod);
    await ip("netns", "add", pod.netns);
    await ip("link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", pod.netns);
    await ip("link", "set", host, "master", this.#bridge, "up");
    const inPod = (...args: string[]) => ip("-n", pod.netns, ...args);
    await inPod("link", "set", "lo", "up");
    await inPod("addr", "add", `${pod.ip}/24`, "dev", "eth0");
    await inPod("link", "set", "eth0", "up");
    await inPod("route", "add", "default", "via", this.gateway);
    return pod;
  }

  /** A Service: an address of its own, whose `port` forwards to `target` (as kube-proxy does). */
  async addService(port: number, target: { host: string; port: number }): Promise<string> {
    const address = `${this.#prefix}.${this.#nextService++}`;
    await ip("addr", "add", `${address}/32`, "dev", this.#bridge);
    const server = createServer((client) => {
      const upstream = createConnection(target);
      client.pipe(upstream).pipe(client);
      client.on("error", () => upstream.destroy());
      upstream.on("error", () => client.destroy());
    });
    this.#servers.push(server);
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, address, resolve);
    });
    return address;
  }

  async close(): Promise<void> {
    for (const server of this.#servers) server.close();
    for (const pod of this.#pods) await ip("netns", "del", pod.netns).catch(() => undefined);
    await ip("link", "del", this.#bridge).catch(() => undefined);
  }
}
