import { EventEmitter, once } from "node:events";
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import type { Duplex } from "node:stream";
import { parse as parseYaml } from "yaml";
import { type KubeconfigInit, writeKubeconfig } from "../kubeconfig.ts";
import { testPki } from "../tls-certs.ts";
import {
  AGGREGATED_V2,
  aggregatedDiscovery,
  apiGroupList,
  apiGroupOf,
  apiResourceList,
  apiVersions,
  VERSION,
  wantsAggregated,
} from "./discovery.ts";
import { ExecServer } from "./exec.ts";
import {
  impersonationOf,
  impersonationRefusal,
  selfSubjectReview,
  TOKEN_USER,
  type UserInfo,
} from "./impersonation.ts";
import { openApiV2Protobuf, openApiV3GroupVersion, openApiV3Root } from "./openapi.ts";
import { jsonPatch, mergePatch, PATCH_TYPES, patchTypeOf } from "./patch.ts";
import { PortForwardServer, type PortHandler } from "./portforward.ts";
import { decodeKubernetesProtobuf } from "./protobuf.ts";
import { groupVersion, type ResourceType } from "./resources.ts";
import { SelectorError } from "./selectors.ts";
import { type DeleteOptions, type KubeObject, KubeStore, StoreError } from "./store.ts";
import { toTable, wantsTable } from "./table.ts";
import { fieldValidationOf, validateFields } from "./validation.ts";
import { serveWatch, type Watcher } from "./watch.ts";

export interface RecordedRequest {
  method: string;
  /** Path and query, as sent. */
  path: string;
  headers: IncomingHttpHeaders;
  /** The header lines as they came (`[name, value, …]`, repeated lines kept). */
  rawHeaders: string[];
  /** The identity its Impersonate-* headers asked for (each header line one value), if any. */
  impersonation?: UserInfo;
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
  /** TCP connections accepted so far (a client that keeps connections alive makes few). */
  readonly connections: number;
  /** Appends a line to a pod's log; `logs?follow=true` readers get it at once. */
  appendLog(ns: string, pod: string, line: string): void;
  /**
   * Sets a Deployment's status as its controller would: `true` every replica ready and available
   * with the current generation observed, `false` none ready, or a number of ready replicas.
   */
  setDeploymentReady(ns: string, name: string, ready: boolean | number): KubeObject;
  /** Sends a BOOKMARK now on every open watch that allowed them (they also come every `bookmarkIntervalMs`). */
  sendBookmarks(): void;
  /** Ends every open watch (as the real server's watch timeout does); clients resume from their versions. */
  endWatches(): void;
  /**
   * Serves a pod's container port to `kubectl port-forward` with `handler` (by default every port
   * writes a greeting line, then echoes): see portforward.ts.
   */
  servePort(ns: string, pod: string, port: number, handler: PortHandler): void;
  /** Serves new connections with another certificate (existing ones keep theirs), as after a CA rotation. */
  useCertificate(pki: { cert: string; key: string }): void;
  /** Writes a kubeconfig for this server (its CA, its token unless overridden). */
  writeKubeconfig(path: string, init?: Partial<KubeconfigInit>): Promise<string>;
  close(): Promise<void>;
}

export interface KubeApiServerOptions {
  token?: string;
  /** How many changes the watch history keeps; a watch from before them is 410 Expired. Default 1000. */
  historyLimit?: number;
  /** Period of BOOKMARK events on watches that allow them. Default 60 s, as the real server (about). */
  bookmarkIntervalMs?: number;
}

/**
 * A Kubernetes API server for tests that the real `kubectl` and `@kubernetes/client-node` accept:
 * HTTPS and bearer-token auth; discovery (legacy and aggregated), `/version`; built-in kinds and
 * CustomResourceDefinitions; list, get, create, update, delete (with propagation), dry runs;
 * label and field selectors; Table output for `kubectl get`; watch from any version the bounded
 * history holds, with bookmarks; PATCH (JSON, merge, strategic) and server-side apply with field
 * ownership; `pods/log?follow=true`; `kubectl exec` over WebSocket (a few built-in commands, see
 * exec.ts); `kubectl port-forward` (SPDY/3.1, tunnelled through a WebSocket or not, to ports a
 * test serves, see portforward.ts); errors as `Status` objects; and for any other Upgrade of
 * `pods/{name}/exec|attach` (SPDY) a 101, then a greeting and an echo.
 */
export async function startKubeApiServer(options: KubeApiServerOptions = {}): Promise<KubeApiServer> {
  const token = options.token ?? "kube-test-token";
  const pki = await testPki();
  const store = new KubeStore({
    ...(options.historyLimit !== undefined && { historyLimit: options.historyLimit }),
  });
  const requests: RecordedRequest[] = [];
  const logs = new Map<string, string[]>();
  const sockets = new Set<Socket | Duplex>();
  const watchers = new Set<Watcher>();
  const exec = new ExecServer();
  const portForward = new PortForwardServer();
  const logEvents = new EventEmitter<{ line: [string, string] }>();
  logEvents.setMaxListeners(0);
  const authorized = (req: IncomingMessage) => req.headers.authorization === `Bearer ${token}`;
  const record = (req: IncomingMessage) => {
    const impersonation = impersonationOf(req);
    requests.push({
      method: req.method ?? "",
      path: req.url ?? "",
      headers: { ...req.headers },
      rawHeaders: [...req.rawHeaders],
      ...(impersonation && { impersonation }),
    });
  };

  const server: Server = createServer({ cert: pki.cert, key: pki.key }, (req, res) => {
    record(req);
    if (!authorized(req)) return sendStatus(res, 401, "Unauthorized", "Unauthorized");
    const partial = impersonationRefusal(req);
    if (partial !== undefined) return sendStatus(res, 500, "InternalError", partial);
    route(req, res).catch((err: unknown) => sendError(res, err));
  });
  let connections = 0;
  server.on("connection", (s: Socket) => {
    connections++;
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
    const partial = impersonationRefusal(req);
    if (partial !== undefined) return refuse(500, "InternalError", partial);
    if (!m) return refuse(404, "NotFound", "the server could not find the requested resource");
    if (!store.has("pods", m[1], m[2]!)) return refuse(404, "NotFound", `pods "${m[2]}" not found`);
    if (m[3] === "exec" && ExecServer.accepts(req)) {
      return exec.handle(req, socket, head, {
        namespace: decodeURIComponent(m[1]!),
        name: decodeURIComponent(m[2]!),
      });
    }
    if (m[3] === "portforward") {
      return portForward.handle(req, socket, head, {
        namespace: decodeURIComponent(m[1]!),
        name: decodeURIComponent(m[2]!),
      });
    }
    // Any other Upgrade (SPDY): a greeting, then an echo of whatever the client sends.
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${req.headers.upgrade}\r\n\r\n`,
    );
    socket.write(`${m[3]} ${m[1]}/${m[2]}\n`);
    if (head.length > 0) socket.write(head);
    socket.pipe(socket);
  });

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "https://kube.test");
    const path = url.pathname.replace(/\/+$/, "");
    const method = req.method ?? "GET";
    const accept = req.headers.accept;
    if (path === "/version") return sendJson(res, 200, VERSION);
    if (path === "/healthz" || path === "/readyz" || path === "/livez") return sendText(res, 200, "ok");
    if (path === "/api" || path === "/apis") {
      const legacy = path === "/api";
      if (wantsAggregated(accept))
        return sendRaw(res, 200, AGGREGATED_V2, JSON.stringify(aggregatedDiscovery(store.registry, legacy)));
      return sendJson(res, 200, legacy ? apiVersions() : apiGroupList(store.registry));
    }
    if (path === "/openapi/v2") {
      res.writeHead(200, { "content-type": "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" });
      return void res.end(openApiV2Protobuf());
    }
    if (path === "/apis/authentication.k8s.io/v1/selfsubjectreviews" && method === "POST") {
      return sendJson(res, 201, selfSubjectReview(impersonationOf(req) ?? TOKEN_USER));
    }
    if (path === "/openapi/v3") return sendJson(res, 200, openApiV3Root(store.registry));
    if (path.startsWith("/openapi/v3/")) {
      const m = /^\/openapi\/v3\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))$/.exec(path);
      const doc = m && openApiV3GroupVersion(store.registry, m[2] ?? "", m[1] ?? m[3]!);
      return doc ? sendJson(res, 200, doc) : notFoundPath(res);
    }
    const target = parsePath(path);
    if (!target) return notFoundPath(res);
    if (target.plural === undefined) {
      const body =
        target.version === undefined
          ? apiGroupOf(store.registry, target.group)
          : apiResourceList(store.registry, target.group, target.version);
      return body ? sendJson(res, 200, body) : notFoundPath(res);
    }
    const type = store.registry.at(target.group, target.version!, target.plural);
    if (!type) return notFoundPath(res);
    const { ns, name, sub } = target;
    if (type.namespaced === false && ns !== undefined) return notFoundPath(res);
    if (sub !== undefined && !type.subresources.includes(sub)) return notFoundPath(res);
    const query = url.searchParams;
    const dryRun = query.getAll("dryRun").includes("All");
    const fieldManager = query.get("fieldManager") ?? undefined;
    const table = wantsTable(accept);
    /** Unknown fields: refused under fieldValidation=Strict, `Warning` headers under Warn (validation.ts). */
    const checkFields = (body: unknown, apply = false) => {
      const mode = fieldValidationOf(query);
      for (const w of validateFields(body, groupVersion(type), type.kind, mode, apply))
        res.appendHeader("Warning", w);
    };

    if (sub === "log") return serveLog(req, res, ns!, name!, query.get("follow") === "true");
    if (sub === "scale") return serveScale(req, res, type, ns!, name!, query);
    if (name === undefined) {
      if (type.namespaced && ns === undefined && method !== "GET") return notFoundPath(res);
      if (method === "GET") {
        const watch = query.get("watch");
        if (watch === "1" || watch === "true") {
          return serveWatch(req, res, store, type, ns, query, {
            table,
            bookmarkIntervalMs: options.bookmarkIntervalMs ?? 60_000,
            watchers,
          });
        }
        const rv = query.get("resourceVersion");
        if (rv && query.get("resourceVersionMatch") === "Exact" && Number(rv) < store.oldestResourceVersion) {
          throw new StoreError(
            410,
            "Expired",
            `too old resource version: ${rv} (${store.oldestResourceVersion})`,
          );
        }
        const items = store.list(type, ns, selectors(query));
        const version = String(store.resourceVersion);
        if (table) return sendJson(res, 200, toTable(type, items, version, query.get("includeObject")));
        return sendJson(res, 200, listOf(type, items, version));
      }
      if (method === "POST") {
        const body = (await readBody(req)) as Partial<KubeObject>;
        checkFields(body);
        if (type.subresources.includes("status") && type.plural !== "customresourcedefinitions")
          delete body?.status;
        return sendJson(
          res,
          201,
          store.create(type, ns, body, { dryRun, ...(fieldManager && { fieldManager }) }),
        );
      }
      if (method === "DELETE") {
        const opts = deleteOptions(query, await readBody(req, true));
        const deleted = store
          .list(type, ns, selectors(query))
          .map((o) => store.delete(type, o.metadata.namespace, o.metadata.name, opts));
        return sendJson(res, 200, listOf(type, deleted, String(store.resourceVersion)));
      }
      return sendStatus(res, 405, "MethodNotAllowed", `${method} is not supported here`);
    }
    if (method === "GET") {
      const object = store.get(type, ns, name);
      if (table)
        return sendJson(
          res,
          200,
          toTable(type, [object], object.metadata.resourceVersion, query.get("includeObject")),
        );
      return sendJson(res, 200, object);
    }
    if (method === "DELETE") {
      if (sub !== undefined)
        return sendStatus(res, 405, "MethodNotAllowed", `DELETE is not supported on ${sub}`);
      return sendJson(
        res,
        200,
        store.delete(type, ns, name, deleteOptions(query, await readBody(req, true))),
      );
    }
    if (method === "PUT") {
      const body = await readBody(req);
      checkFields(body);
      const opts = {
        dryRun,
        fieldManager: fieldManager ?? userAgentManager(req),
        ...(sub && { subresource: sub }),
      };
      return sendJson(res, 200, store.replace(type, ns, name, body, opts));
    }
    if (method === "PATCH") {
      const patchType = patchTypeOf(req.headers["content-type"]);
      if (!patchType) {
        throw new StoreError(
          415,
          "UnsupportedMediaType",
          `the body of the request was in an unknown format - accepted media types include: ${Object.keys(PATCH_TYPES).join(", ")}`,
        );
      }
      const force = query.get("force") === "true";
      if (force && patchType !== "apply") {
        throw new StoreError(
          422,
          "Invalid",
          "force: Invalid value: true: may not be specified for non-apply patch",
        );
      }
      const body = await readBody(req);
      if (patchType !== "json") checkFields(body, patchType === "apply");
      const manager = fieldManager ?? (patchType === "apply" ? undefined : userAgentManager(req));
      const { object, created } = store.patch(type, ns, name, patchType, body, {
        dryRun,
        force,
        ...(manager && { fieldManager: manager }),
        ...(sub && { subresource: sub }),
      });
      return sendJson(res, created ? 201 : 200, object);
    }
    return sendStatus(res, 405, "MethodNotAllowed", `${method} is not supported here`);
  }

  /** `<workload>/scale`: an autoscaling/v1 Scale over the object's `spec.replicas` (`kubectl scale`). */
  async function serveScale(
    req: IncomingMessage,
    res: ServerResponse,
    type: ResourceType,
    ns: string,
    name: string,
    query: URLSearchParams,
  ) {
    const current = store.get(type, ns, name);
    const scale = scaleOf(current);
    const method = req.method ?? "GET";
    if (method === "GET") return sendJson(res, 200, scale);
    if (method !== "PUT" && method !== "PATCH")
      return sendStatus(res, 405, "MethodNotAllowed", `${method} is not supported on scale`);
    const body = await readBody(req);
    let next: unknown = body;
    if (method === "PATCH") {
      const patchType = patchTypeOf(req.headers["content-type"]);
      if (patchType === "json") next = jsonPatch(scale, body);
      else if (patchType === "merge" || patchType === "strategic") next = mergePatch(scale, body);
      else
        throw new StoreError(
          415,
          "UnsupportedMediaType",
          "scale takes JSON, merge and strategic merge patches",
        );
    }
    const replicas = (next as { spec?: { replicas?: unknown } })?.spec?.replicas;
    if (typeof replicas !== "number" || !Number.isInteger(replicas) || replicas < 0) {
      throw new StoreError(
        422,
        "Invalid",
        `Scale.autoscaling "${name}" is invalid: spec.replicas: Invalid value: must be a non-negative integer`,
      );
    }
    const updated = structuredClone(current);
    updated.spec = { ...(updated.spec as object), replicas };
    const written = store.write(type, store.get(type, ns, name), updated, {
      dryRun: query.getAll("dryRun").includes("All"),
      fieldManager: query.get("fieldManager") ?? userAgentManager(req),
      subresource: "scale",
    });
    return sendJson(res, 200, scaleOf(written));
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
    get connections() {
      return connections;
    },
    appendLog(ns, pod, line) {
      const key = `${ns}/${pod}`;
      logs.set(key, [...(logs.get(key) ?? []), line]);
      logEvents.emit("line", key, line);
    },
    setDeploymentReady: (ns, name, ready) => store.setDeploymentStatus(ns, name, ready),
    sendBookmarks() {
      for (const w of watchers) w.bookmark();
    },
    endWatches() {
      for (const w of [...watchers]) w.end();
    },
    servePort: (ns, pod, port, handler) => portForward.serve(ns, pod, port, handler),
    useCertificate: ({ cert, key }) => server.setSecureContext({ cert, key }),
    writeKubeconfig: (path, init = {}) =>
      writeKubeconfig(path, { server: url, caCert: pki.caCert, token, ...init }),
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      exec.close();
      portForward.close();
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}

interface Target {
  group: string;
  version?: string;
  ns?: string;
  plural?: string;
  name?: string;
  sub?: string;
}

/**
 * `/api/v1[/namespaces/<ns>]/<plural>[/<name>[/<sub>]]`, the same under `/apis/<group>/<version>`,
 * and `/apis/<group>[/<version>]` for discovery. Undefined if it is none of these.
 */
function parsePath(path: string): Target | undefined {
  const parts = path.split("/").slice(1).map(decodeURIComponent);
  let group: string;
  let version: string | undefined;
  let rest: string[];
  if (parts[0] === "api") {
    if (parts[1] !== "v1") return undefined;
    [group, version, rest] = ["", "v1", parts.slice(2)];
  } else if (parts[0] === "apis" && parts[1]) {
    [group, version, rest] = [parts[1], parts[2], parts.slice(3)];
    if (version === undefined) return { group };
  } else return undefined;
  if (rest.length === 0) return { group, version };
  let ns: string | undefined;
  // `namespaces/<ns>/<plural>...` unless it is the namespace itself (`namespaces/<ns>[/status]`).
  if (rest[0] === "namespaces" && rest.length >= 3 && rest[2] !== "status" && rest[2] !== "finalize") {
    ns = rest[1];
    rest = rest.slice(2);
  }
  if (rest.length > 3) return undefined;
  const [plural, name, sub] = rest;
  return {
    group,
    version,
    plural,
    ...(ns !== undefined && { ns }),
    ...(name !== undefined && { name }),
    ...(sub !== undefined && { sub }),
  };
}

function scaleOf(o: KubeObject) {
  const spec = (o.spec ?? {}) as { replicas?: number; selector?: { matchLabels?: Record<string, string> } };
  const labels = spec.selector?.matchLabels ?? {};
  return {
    kind: "Scale",
    apiVersion: "autoscaling/v1",
    metadata: {
      name: o.metadata.name,
      namespace: o.metadata.namespace,
      uid: o.metadata.uid,
      resourceVersion: o.metadata.resourceVersion,
      creationTimestamp: o.metadata.creationTimestamp,
    },
    spec: { replicas: spec.replicas ?? 1 },
    status: {
      replicas: (o.status as { replicas?: number } | undefined)?.replicas ?? 0,
      selector: Object.entries(labels)
        .map(([k, v]) => `${k}=${v}`)
        .join(","),
    },
  };
}

/** The manager of a write that names none: the client's program, from its User-Agent, as the real server does. */
function userAgentManager(req: IncomingMessage): string {
  return (req.headers["user-agent"] ?? "unknown").split("/")[0]!.slice(0, 128) || "unknown";
}

function selectors(query: URLSearchParams) {
  return { labelSelector: query.get("labelSelector"), fieldSelector: query.get("fieldSelector") };
}

function deleteOptions(query: URLSearchParams, body: unknown): DeleteOptions {
  const b = (body ?? {}) as { propagationPolicy?: string; dryRun?: string[]; orphanDependents?: boolean };
  const policy =
    query.get("propagationPolicy") ?? b.propagationPolicy ?? (b.orphanDependents ? "Orphan" : undefined);
  if (policy !== undefined && !["Background", "Foreground", "Orphan"].includes(policy)) {
    throw new StoreError(422, "Invalid", `propagationPolicy: Unsupported value: "${policy}"`);
  }
  return {
    ...(policy && { propagationPolicy: policy as DeleteOptions["propagationPolicy"] }),
    dryRun: query.getAll("dryRun").includes("All") || (b.dryRun ?? []).includes("All"),
  };
}

/** The list's version is the store's: a watch from it sees exactly the later changes. */
function listOf(type: ResourceType, items: KubeObject[], resourceVersion: string) {
  return {
    apiVersion: groupVersion(type),
    kind: type.listKind,
    metadata: { resourceVersion },
    items,
  };
}

export function statusBody(code: number, reason: string, message: string, details?: object): string {
  return JSON.stringify({
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    ...(details && { details }),
    code,
  });
}

function sendError(res: ServerResponse, err: unknown): void {
  if (res.headersSent) {
    res.destroy();
  } else if (err instanceof StoreError) {
    sendRaw(res, err.code, "application/json", statusBody(err.code, err.reason, err.message, err.details));
  } else if (err instanceof SelectorError || err instanceof BodyError) {
    sendStatus(res, 400, "BadRequest", err.message);
  } else {
    sendStatus(res, 500, "InternalError", (err as Error).message);
  }
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

class BodyError extends Error {}

/** The request body: JSON, YAML or Kubernetes protobuf as the content type says. Empty is undefined if `optional`. */
export async function readBody(req: IncomingMessage, optional = false): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const type = req.headers["content-type"] ?? "";
  if (type.startsWith("application/vnd.kubernetes.protobuf"))
    return decodeKubernetesProtobuf(Buffer.concat(chunks));
  if (/cbor/.test(type)) {
    throw new StoreError(
      415,
      "UnsupportedMediaType",
      "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf",
    );
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim() === "" && optional) return undefined;
  try {
    return /yaml/.test(req.headers["content-type"] ?? "") ? parseYaml(text) : JSON.parse(text);
  } catch (err) {
    throw new BodyError(`the request body could not be decoded: ${(err as Error).message}`);
  }
}
