// Calls a Flux webhook Receiver, as GitLab's agent does: a POST to the receiver's webhook path
// (`status.webhookPath`, e.g. /hook/<sha256>) under `flux.webhook_receiver_url`. A URL that is a
// path of the Kubernetes API's service proxy (`/api/v1/namespaces/<ns>/services/<name>/proxy`) goes
// through the Kubernetes API with agentk's credentials; any other goes straight to its host.
import * as http from "node:http";
import * as https from "node:https";
import type { KubeConfig } from "@kubernetes/client-node";

/** GitLab's default: notification-controller's webhook-receiver Service in flux-system. */
export const DEFAULT_WEBHOOK_RECEIVER_URL = "http://webhook-receiver.flux-system.svc.cluster.local";
const KUBE_SERVICE_PROXY = /\/api\/v1\/namespaces\/[^/]+\/services\/[^/]+\/proxy/;
/** How long one call to the receiver may take. */
export const TRIGGER_TIMEOUT_MS = 10_000;

export class TriggerError extends Error {
  override name = "TriggerError";
}

export class ReceiverTrigger {
  readonly #base: URL;
  readonly #kube: KubeConfig | undefined;

  /** Throws a TriggerError for a URL that is neither absolute HTTP(S) nor a service proxy path. */
  constructor(receiverUrl: string, kc: KubeConfig) {
    if (KUBE_SERVICE_PROXY.test(receiverUrl)) {
      const server = kc.getCurrentCluster()?.server;
      if (!server) throw new TriggerError("no Kubernetes API server to reach the receiver through");
      const base = new URL(server);
      base.pathname = joinPath(base.pathname, receiverUrl);
      this.#base = base;
      this.#kube = kc;
      return;
    }
    let base: URL;
    try {
      base = new URL(receiverUrl);
    } catch {
      throw new TriggerError(`flux.webhook_receiver_url: not a URL: ${JSON.stringify(receiverUrl)}`);
    }
    if (base.protocol !== "http:" && base.protocol !== "https:") {
      throw new TriggerError(`flux.webhook_receiver_url: ${base.protocol} is not http: or https:`);
    }
    this.#base = base;
    this.#kube = undefined;
  }

  /** The URL a webhook path is called at. */
  urlOf(webhookPath: string): URL {
    const url = new URL(this.#base);
    url.pathname = joinPath(url.pathname, webhookPath);
    return url;
  }

  /** POSTs to the receiver; rejects unless it answers 200 (what notification-controller answers). */
  async trigger(webhookPath: string, signal: AbortSignal): Promise<void> {
    const url = this.urlOf(webhookPath);
    const options: https.RequestOptions = { method: "POST", headers: { "content-length": "0" } };
    if (this.#kube) await this.#kube.applyToHTTPSOptions(options);
    const deadline = AbortSignal.any([signal, AbortSignal.timeout(TRIGGER_TIMEOUT_MS)]);
    const status = await new Promise<number>((resolve, reject) => {
      const send = url.protocol === "https:" ? https.request : http.request;
      const req = send(url, { ...options, signal: deadline }, (res) => {
        res.resume(); // the body says nothing we need
        res.on("end", () => resolve(res.statusCode ?? 0));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end();
    });
    // Not the path: it is what lets a caller in (a webhook path is its secret).
    if (status !== 200) throw new TriggerError(`the receiver answered ${status}`);
  }
}

function joinPath(a: string, b: string): string {
  return `${a.replace(/\/+$/, "")}/${b.replace(/^\/+/, "")}`;
}
