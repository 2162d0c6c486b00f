import { EventEmitter, once } from "node:events";
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import type { Duplex } from "node:stream";
import { type KubeObject, KubeStore, matches, RESOURCES, type Resource, StoreError } from "./kube-store.ts";
import { type KubeconfigInit, writeKubeconfig } from "./kubeconfig.ts";
import { testPki } from "./tls-certs.ts";

export { type KubeObject, KubeStore } from "./kube-store.ts";

export interface RecordedRequest {
  method: string;
  /** Path and query, as sent. */
  path: string;
  headers: IncomingHttpHeaders;
}

export interface KubeApiServer {
  /** `https://127.0.0.1:<port>` */
  readonly url: string;
  /** PEM of the CA that signed the server certificate. */
  readonly caCert: string;
  /** The only bearer token accepted. */
  readonly token: string;
  readonly store: KubeStore;
  /** Every request (upgrades included) in arrival order, before authentication. */
  readonly requests: RecordedRequest[];
  /** Appends a line to a pod's log; `logs?follow=true` readers get it at once. */
  appendLog(ns: string, pod: string, line: string): void;
  /** Serves new connections with another certificate (existing ones keep theirs), as after a CA rotation. */
  useCertificate(pki: { cert: string; key: string }): void;
  /** Writes a kubeconfig for this server (its CA, its token unless overridden). */
  writeKubeconfig(path: string, init?: Partial<KubeconfigInit>): Promise<string>;
  close(): Promise<void>;
}

/**
 * A Kubernetes API server for tests, speaking the wire protocol the real client and kubectl
 * use: HTTPS, bearer-token auth, discovery, list (with resourceVersion), get, create, delete,
 * watch streaming `{"type","object"}` lines from any resourceVersion, `pods/log?follow=true`,
 * errors as `Status` objects, and an exec-like Upgrade endpoint (101, then a greeting and an
 * echo of whatever the client sends) for `pods/{name}/exec|attach|portforward`.
 */
export async function startKubeApiServer(options: { token?: string } = {}): Promise<KubeApiServer> {
  const token = options.token ?? "kube-test-token";
  const pki = await testPki();
  const store = new KubeStore();
  const requests: RecordedRequest[] = [];
  const logs = new Map<string, string[]>();
  const sockets = new Set<Socket | Duplex>();
  const logEvents = new EventEmitter<{ line: [string, string] }>();
  logEvents.setMaxListeners(0);
  const authorized = (req: IncomingMessage) => req.headers.authorization === `Bearer ${token}`;
  const record = (req: IncomingMessage) =>
    requests.push({ method: req.method ?? "", path: req.url ?? "", headers: { ...req.headers } });

  const server: Server = createServer({ cert: pki.cert, key: pki.key }, (req, res) => {
    record(req);
    if (!authorized(req)) return sendStatus(res, 401, "Unauthorized", "Unauthorized");
    try {
      route(req, res);
    } catch (err) {
      if (err instanceof StoreError) sendStatus(res, err.code, err.reason, err.message);
      else sendStatus(res, 500, "InternalError", (err as Error).message);
    }
  });
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  });
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    record(req);
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    const m = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/(exec|attach|portforward)(\?|$)/.exec(
      req.url ?? "",
    );
    const refuse = (code: number, reason: string, message: string) =>
      socket.end(rawResponse(code, reason, statusBody(code, reason, message)));
    if (!authorized(req)) return refuse(401, "Unauthorized", "Unauthorized");
    if (!m) return refuse(404, "NotFound", "the server could not find the requested resource");
    try {
      store.get("pods", m[1], m[2]!);
    } catch (err) {
      return refuse(404, "NotFound", (err as Error).message);
    }
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${req.headers.upgrade}\r\n\r\n`,
    );
    socket.write(`${m[3]} ${m[1]}/${m[2]}\n`);
    if (head.length > 0) socket.write(head);
    socket.pipe(socket);
  });

  function route(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? "/", "https://kube.test");
    const path = url.pathname.replace(/\/+$/, "");
    const method = req.method ?? "GET";
    if (path === "/api") return sendJson(res, 200, apiVersions());
    if (path === "/api/v1") return sendJson(res, 200, apiResourceList());
    if (path === "/version")
      return sendJson(res, 200, { major: "1", minor: "31", gitVersion: "v1.31.0-test" });
    if (path === "/healthz" || path === "/readyz" || path === "/livez") return sendText(res, 200, "ok");

    if (path === "/apis") return sendJson(res, 200, apiGroupList());
    if (path === "/apis/coordination.k8s.io/v1") return sendJson(res, 200, groupResourceList());
    // Core resources under /api/v1, the Lease group's under /apis/coordination.k8s.io/v1.
    const group = path.startsWith("/apis/coordination.k8s.io/v1/") ? "coordination.k8s.io/v1" : "v1";
    const parts = path.split("/").slice(group === "v1" ? 3 : 4);
    if ((group === "v1" && !path.startsWith("/api/v1/")) || parts.length === 0) return notFoundPath(res);
    // /api/v1/{resource}[/{name}] (cluster-scoped, or every namespace for namespaced ones)
    // /api/v1/namespaces/{ns}/{resource}[/{name}[/log]]
    let ns: string | undefined;
    let rest = parts;
    if (parts[0] === "namespaces" && parts.length >= 3) {
      ns = decodeURIComponent(parts[1]!);
      rest = parts.slice(2);
    }
    const resource = rest[0] as Resource;
    if (!(resource in RESOURCES) || RESOURCES[resource].apiVersion !== group) return notFoundPath(res);
    const namespaced = RESOURCES[resource].namespaced;
    const name = rest[1] === undefined ? undefined : decodeURIComponent(rest[1]);
    const sub = rest[2];
    if (rest.length > 3 || (sub !== undefined && !(resource === "pods" && sub === "log")))
      return notFoundPath(res);
    if (namespaced && ns === undefined && (name !== undefined || method !== "GET")) return notFoundPath(res);

    if (sub === "log") return serveLog(req, res, ns!, name!, url.searchParams.get("follow") === "true");
    if (name === undefined) {
      if (method === "GET") {
        const watch = url.searchParams.get("watch");
        if (watch === "1" || watch === "true") return serveWatch(req, res, resource, ns, url.searchParams);
        return sendJson(res, 200, listOf(resource, store.list(resource, ns), store.resourceVersion));
      }
      if (method === "POST") {
        void readJson(req).then(
          (body) => {
            try {
              sendJson(res, 201, store.create(resource, ns, body));
            } catch (err) {
              const e = err as StoreError;
              sendStatus(res, e.code ?? 500, e.reason ?? "InternalError", e.message);
            }
          },
          () => sendStatus(res, 400, "BadRequest", "the request body is not JSON"),
        );
        return;
      }
      return sendStatus(res, 405, "MethodNotAllowed", `${method} is not supported here`);
    }
    if (method === "GET") return sendJson(res, 200, store.get(resource, ns, name));
    if (method === "DELETE") return sendJson(res, 200, store.delete(resource, ns, name));
    if (method === "PUT") {
      void readJson(req).then(
        (body) => {
          try {
            sendJson(res, 200, store.replace(resource, ns, name, body));
          } catch (err) {
            const e = err as StoreError;
            sendStatus(res, e.code ?? 500, e.reason ?? "InternalError", e.message);
          }
        },
        () => sendStatus(res, 400, "BadRequest", "the request body is not JSON"),
      );
      return;
    }
    return sendStatus(res, 405, "MethodNotAllowed", `${method} is not supported here`);
  }

  function serveWatch(
    req: IncomingMessage,
    res: ServerResponse,
    resource: Resource,
    ns: string | undefined,
    query: URLSearchParams,
  ) {
    const from = query.get("resourceVersion");
    if (from !== null && from !== "" && !/^\d+$/.test(from)) {
      return sendStatus(res, 400, "BadRequest", `invalid resourceVersion ${JSON.stringify(from)}`);
    }
    res.writeHead(200, { "content-type": "application/json", "cache-control": "no-cache" });
    res.flushHeaders(); // a watch with nothing to say yet still answers at once
    const send = (type: string, object: KubeObject) => res.write(`${JSON.stringify({ type, object })}\n`);
    // No version (or "0"): the current state as ADDED events, then the changes (as the real server).
    if (!from || from === "0") for (const o of store.list(resource, ns)) send("ADDED", o);
    else for (const e of store.since(resource, ns, Number(from))) send(e.type, e.object);
    const onChange = (e: Parameters<typeof matches>[0]) => {
      if (matches(e, resource, ns)) send(e.type, e.object);
    };
    store.on("change", onChange);
    const seconds = Number(query.get("timeoutSeconds") ?? 0);
    const timer = seconds > 0 ? setTimeout(() => res.end(), seconds * 1000) : undefined;
    const stop = () => {
      clearTimeout(timer);
      store.off("change", onChange);
    };
    res.once("close", stop);
    req.once("close", stop);
  }

  function serveLog(req: IncomingMessage, res: ServerResponse, ns: string, pod: string, follow: boolean) {
    store.get("pods", ns, pod);
    const key = `${ns}/${pod}`;
    res.writeHead(200, { "content-type": "text/plain" });
    res.flushHeaders();
    for (const line of logs.get(key) ?? []) res.write(`${line}\n`);
    if (!follow) return void res.end();
    const onLine = (k: string, line: string) => {
      if (k === key) res.write(`${line}\n`);
    };
    logEvents.on("line", onLine);
    const stop = () => logEvents.off("line", onLine);
    res.once("close", stop);
    req.once("close", stop);
  }

  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    caCert: pki.caCert,
    token,
    store,
    requests,
    appendLog(ns, pod, line) {
      const key = `${ns}/${pod}`;
      logs.set(key, [...(logs.get(key) ?? []), line]);
      logEvents.emit("line", key, line);
    },
    useCertificate: ({ cert, key }) => server.setSecureContext({ cert, key }),
    writeKubeconfig: (path, init = {}) =>
      writeKubeconfig(path, { server: url, caCert: pki.caCert, token, ...init }),
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}

/** The list's version is the store's: a watch from it sees exactly the later changes. */
function listOf(resource: Resource, items: KubeObject[], resourceVersion: number) {
  return {
    apiVersion: "v1",
    kind: `${RESOURCES[resource].kind}List`,
    metadata: { resourceVersion: String(resourceVersion) },
    items,
  };
}

function apiVersions() {
  return {
    kind: "APIVersions",
    versions: ["v1"],
    serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: "127.0.0.1" }],
  };
}

const VERBS = ["create", "delete", "get", "list", "watch", "update"];

/** Discovery entries of the resources served under `groupVersion`. */
function resourcesOf(groupVersion: string) {
  return Object.entries(RESOURCES)
    .filter(([, r]) => r.apiVersion === groupVersion)
    .map(([name, r]) => ({
      name,
      singularName: r.kind.toLowerCase(),
      namespaced: r.namespaced,
      kind: r.kind,
      verbs: VERBS,
    }));
}

function apiGroupList() {
  const version = { groupVersion: "coordination.k8s.io/v1", version: "v1" };
  return {
    kind: "APIGroupList",
    apiVersion: "v1",
    groups: [{ name: "coordination.k8s.io", versions: [version], preferredVersion: version }],
  };
}

function groupResourceList() {
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion: "coordination.k8s.io/v1",
    resources: resourcesOf("coordination.k8s.io/v1"),
  };
}

function apiResourceList() {
  return {
    kind: "APIResourceList",
    groupVersion: "v1",
    resources: [
      ...resourcesOf("v1"),
      { name: "pods/log", singularName: "", namespaced: true, kind: "Pod", verbs: ["get"] },
      {
        name: "pods/exec",
        singularName: "",
        namespaced: true,
        kind: "PodExecOptions",
        verbs: ["create", "get"],
      },
    ],
  };
}

export function statusBody(code: number, reason: string, message: string): string {
  return JSON.stringify({
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    code,
  });
}

function sendStatus(res: ServerResponse, code: number, reason: string, message: string): void {
  sendRaw(res, code, "application/json", statusBody(code, reason, message));
}

function sendJson(res: ServerResponse, code: number, body: unknown): void {
  sendRaw(res, code, "application/json", JSON.stringify(body));
}

function sendText(res: ServerResponse, code: number, body: string): void {
  sendRaw(res, code, "text/plain; charset=utf-8", body);
}

function sendRaw(res: ServerResponse, code: number, type: string, body: string): void {
  res.writeHead(code, { "content-type": type, "content-length": Buffer.byteLength(body) }).end(body);
}

function notFoundPath(res: ServerResponse): void {
  sendStatus(res, 404, "NotFound", "the server could not find the requested resource");
}

function rawResponse(code: number, reason: string, body: string): string {
  return `HTTP/1.1 ${code} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}
