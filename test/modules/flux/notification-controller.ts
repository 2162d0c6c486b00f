// Flux's notification-controller, as much as GitLab's agent relies on (v1.1.0,
// internal/controller/receiver_controller.go and internal/server/receiver_handlers.go), over the
// Kubernetes test server's store: a Receiver gets `status.webhookPath` = /hook/<sha256(token + name
// + namespace)> (the token from its Secret) and Ready; a POST to that path annotates each resource
// the Receiver names with `reconcile.fluxcd.io/requestedAt`, which makes source-controller fetch
// the GitRepository at once. Unknown paths get 404, as from the real receiver server.
import { createHash } from "node:crypto";
import { EventEmitter } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { KubeObject, KubeStore } from "../../support/kube-apiserver.ts";

export const RECEIVERS = "receivers.notification.toolkit.fluxcd.io";
export const GIT_REPOSITORIES = "gitrepositories.source.toolkit.fluxcd.io";
export const REQUESTED_AT = "reconcile.fluxcd.io/requestedAt";

/** notification-controller's defaults for a resource named without apiVersion. */
const DEFAULT_API_VERSIONS: Record<string, string> = {
  GitRepository: "source.toolkit.fluxcd.io/v1",
};

interface ReceiverSpec {
  secretRef?: { name?: string };
  resources?: { kind: string; name: string; namespace?: string; apiVersion?: string }[];
}

export interface HookCall {
  path: string;
  status: number;
  /** `namespace/name` of the resources annotated. */
  annotated: string[];
}

export class NotificationController extends EventEmitter<{ hook: [HookCall] }> {
  readonly calls: HookCall[] = [];
  readonly #store: KubeStore;
  readonly #server: Server;
  // After the write that announced the change, not inside it.
  readonly #onChange = () => queueMicrotask(() => this.#reconcileReceivers());

  private constructor(store: KubeStore) {
    super();
    this.#store = store;
    this.#server = createServer((req, res) => {
      const call = this.#handle(req.method ?? "", req.url ?? "");
      req.resume();
      res.writeHead(call.status).end();
      this.calls.push(call);
      this.emit("hook", call);
    });
    store.on("change", this.#onChange);
  }

  /** Starts watching Receivers and serving webhooks on a loopback port. */
  static async start(store: KubeStore): Promise<NotificationController> {
    const c = new NotificationController(store);
    await new Promise<void>((resolve) => c.#server.listen(0, "127.0.0.1", resolve));
    c.#reconcileReceivers();
    return c;
  }

  /** Where the webhook receiver listens (flux.webhook_receiver_url). */
  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    this.#store.off("change", this.#onChange);
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }

  /** The Receiver reconciler: every Receiver whose Secret holds a token gets its webhook path and Ready. */
  #reconcileReceivers(): void {
    if (!this.#served()) return;
    for (const r of this.#store.list(RECEIVERS, undefined)) {
      const ns = r.metadata.namespace!;
      const secretName = (r.spec as ReceiverSpec | undefined)?.secretRef?.name ?? "";
      if (!this.#store.has("secrets", ns, secretName)) continue;
      const data = this.#store.get("secrets", ns, secretName).data as Record<string, string> | undefined;
      if (data?.token === undefined) continue;
      const token = Buffer.from(data.token, "base64").toString();
      const webhookPath = `/hook/${createHash("sha256")
        .update(token + r.metadata.name + ns)
        .digest("hex")}`;
      const status = (r.status ?? {}) as { webhookPath?: string };
      if (status.webhookPath === webhookPath) continue;
      const generation = r.metadata.generation ?? 1;
      this.#store.update(
        RECEIVERS,
        ns,
        r.metadata.name,
        {
          status: {
            webhookPath,
            observedGeneration: generation,
            conditions: [
              {
                type: "Ready",
                status: "True",
                reason: "Succeeded",
                message: `Receiver initialized for path: ${webhookPath}`,
                lastTransitionTime: new Date().toISOString(),
                observedGeneration: generation,
              },
            ],
          },
        },
        { subresource: "status", fieldManager: "notification-controller" },
      );
    }
  }

  #served(): boolean {
    try {
      this.#store.type(RECEIVERS);
      return true;
    } catch {
      return false;
    }
  }

  /** The receiver server: POST /hook/<digest> annotates the Receiver's resources. */
  #handle(method: string, path: string): HookCall {
    const receiver: KubeObject | undefined = this.#served()
      ? this.#store
          .list(RECEIVERS, undefined)
          .find((r) => (r.status as { webhookPath?: string } | undefined)?.webhookPath === path)
      : undefined;
    if (method !== "POST" || !receiver) return { path, status: 404, annotated: [] };
    const annotated: string[] = [];
    for (const res of (receiver.spec as ReceiverSpec).resources ?? []) {
      const ns = res.namespace || receiver.metadata.namespace!;
      const apiVersion = res.apiVersion ?? DEFAULT_API_VERSIONS[res.kind];
      if (apiVersion !== "source.toolkit.fluxcd.io/v1" || res.kind !== "GitRepository") continue;
      if (!this.#store.has(GIT_REPOSITORIES, ns, res.name)) return { path, status: 500, annotated };
      this.#store.patch(
        GIT_REPOSITORIES,
        ns,
        res.name,
        "merge",
        { metadata: { annotations: { [REQUESTED_AT]: new Date().toISOString() } } },
        { fieldManager: "notification-controller" },
      );
      annotated.push(`${ns}/${res.name}`);
    }
    return { path, status: 200, annotated };
  }
}
