/** Promise wrappers over the generic test client that record everything a caller can observe. */
import * as grpc from "@grpc/grpc-js";
import type { Req, Res } from "./test-service.ts";

export interface Outcome {
  code: grpc.status;
  details: string;
  responses: Res[];
  /** `x-*` keys only; binary values as `base64:…`. */
  initial: Record<string, string[]>;
  trailing: Record<string, string[]>;
}

export interface CallOpts {
  metadata?: grpc.Metadata;
  /** Milliseconds from now. */
  deadlineMs?: number;
  /** Cancel the call when this settles (e.g. once the server has seen it). */
  cancelWhen?: Promise<unknown>;
  /** Each response of a response stream, as it arrives. */
  onResponse?: (res: Res) => void;
}

/** What every client call shares (grpc.Call is a union whose `on` overloads do not combine). */
interface AnyCall {
  // biome-ignore lint/suspicious/noExplicitAny: event payloads differ per event.
  on(event: string, listener: (...args: any[]) => void): unknown;
  cancel(): void;
}

// biome-ignore lint/suspicious/noExplicitAny: the generic client's methods are untyped.
export type GenericClient = grpc.Client & Record<string, (...args: any[]) => any>;

function pick(md: grpc.Metadata | undefined): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [key, values] of Object.entries(md?.toJSON() ?? {})) {
    if (!key.startsWith("x-")) continue;
    out[key] = values.map((v) => (Buffer.isBuffer(v) ? `base64:${v.toString("base64")}` : String(v)));
  }
  return out;
}

function callOptions(opts: CallOpts): grpc.CallOptions {
  return opts.deadlineMs === undefined ? {} : { deadline: Date.now() + opts.deadlineMs };
}

/** Resolves once the call's status arrived and, for response streams, the stream is done. */
function observe(call: AnyCall, opts: CallOpts, responses: Res[], streaming: boolean): Promise<Outcome> {
  let initial: grpc.Metadata | undefined;
  call.on("metadata", (md: grpc.Metadata) => {
    initial = md;
  });
  if (streaming) {
    call.on("data", (r: Res) => {
      responses.push(r);
      opts.onResponse?.(r);
    });
  }
  void opts.cancelWhen?.then(() => call.cancel());
  const status = new Promise<grpc.StatusObject>((resolve) => call.on("status", resolve));
  const done = streaming
    ? new Promise<void>((resolve) => {
        call.on("end", resolve);
        call.on("error", () => resolve());
      })
    : Promise.resolve();
  if (!streaming) call.on("error", () => {});
  return Promise.all([status, done]).then(([s]) => ({
    code: s.code,
    details: s.details,
    responses,
    initial: pick(initial),
    trailing: pick(s.metadata),
  }));
}

export function unary(client: GenericClient, req: Req, opts: CallOpts = {}): Promise<Outcome> {
  const responses: Res[] = [];
  const call = client.unary(
    req,
    opts.metadata ?? new grpc.Metadata(),
    callOptions(opts),
    (_e: unknown, r?: Res) => {
      if (r) responses.push(r);
    },
  ) as AnyCall;
  return observe(call, opts, responses, false);
}

export function serverStream(client: GenericClient, req: Req, opts: CallOpts = {}): Promise<Outcome> {
  const call = client.serverStream(req, opts.metadata ?? new grpc.Metadata(), callOptions(opts)) as AnyCall;
  return observe(call, opts, [], true);
}

export function clientStream(client: GenericClient, reqs: Req[], opts: CallOpts = {}): Promise<Outcome> {
  const responses: Res[] = [];
  const call = client.clientStream(
    opts.metadata ?? new grpc.Metadata(),
    callOptions(opts),
    (_e: unknown, r?: Res) => {
      if (r) responses.push(r);
    },
  ) as grpc.ClientWritableStream<Req>;
  const outcome = observe(call, opts, responses, false);
  for (const r of reqs) call.write(r);
  if (!opts.cancelWhen) call.end();
  return outcome;
}

export function bidi(client: GenericClient, reqs: Req[], opts: CallOpts = {}): Promise<Outcome> {
  const call = client.bidi(
    opts.metadata ?? new grpc.Metadata(),
    callOptions(opts),
  ) as grpc.ClientDuplexStream<Req, Res>;
  const outcome = observe(call, opts, [], true);
  for (const r of reqs) call.write(r);
  if (!opts.cancelWhen) call.end();
  return outcome;
}

export function echoMetadata(): grpc.Metadata {
  const md = new grpc.Metadata();
  md.add("x-echo-text", "hello");
  md.add("x-echo-text", "again");
  md.add("x-echo-data-bin", Buffer.from([0, 1, 2, 255]));
  return md;
}
