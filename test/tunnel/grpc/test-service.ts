/**
 * A small hand-written gRPC service (JSON messages) exercising the four call types, metadata,
 * deadlines, cancellation and errors. What the handlers see is recorded for the tests.
 */
import { EventEmitter } from "node:events";
import * as grpc from "@grpc/grpc-js";

export interface Req {
  text?: string;
  /** serverStream: how many replies. */
  count?: number;
  /** Reply with this status instead (after `count` replies for serverStream). */
  fail?: { code: grpc.status; details: string };
  /** Never answer; wait for the call to be cancelled (by the client or its deadline). */
  hang?: boolean;
  /** unary: hang like `hang` on the first attempt, answer a retry (grpc-js retry policy). */
  hangFirst?: boolean;
  /** Pad the reply to this many bytes (flow control across the stream). */
  pad?: number;
  /** serverStream: after `count` replies, keep the call open until it is cancelled (a feed). */
  hold?: boolean;
}

export interface Res {
  text: string;
  /** Milliseconds to the deadline the server saw; null without one. */
  deadlineInMs?: number | null;
  pad?: string;
}

const json = {
  serialize: (v: unknown) => Buffer.from(JSON.stringify(v)),
  deserialize: (b: Buffer) => JSON.parse(b.toString("utf8")),
};

function method(name: string, requestStream: boolean, responseStream: boolean) {
  return {
    path: `/test.Test/${name}`,
    requestStream,
    responseStream,
    requestSerialize: json.serialize,
    requestDeserialize: json.deserialize,
    responseSerialize: json.serialize,
    responseDeserialize: json.deserialize,
  };
}

export const testService = {
  unary: method("Unary", false, false),
  serverStream: method("ServerStream", false, true),
  clientStream: method("ClientStream", true, false),
  bidi: method("Bidi", true, true),
} satisfies grpc.ServiceDefinition;

export const TestClient = grpc.makeGenericClientConstructor(testService, "Test");

/** The surface every server call shares (grpc-js does not export it by name). */
export interface ObservedCall {
  readonly metadata: grpc.Metadata;
  cancelled: boolean;
  getPath(): string;
  getHost(): string;
  getDeadline(): grpc.Deadline;
  once(event: "cancelled", listener: () => void): unknown;
}

/** What the handlers saw, for assertions. */
export interface ServerEvents {
  /** A call arrived. */
  call: [call: ObservedCall];
  /** The call was cancelled (client cancel, deadline, connection loss). */
  cancelled: [path: string];
}

export class TestServiceRecorder extends EventEmitter<ServerEvents> {
  readonly calls: ObservedCall[] = [];
  readonly cancelled: string[] = [];

  observe(call: ObservedCall): void {
    this.calls.push(call);
    call.once("cancelled", () => {
      this.cancelled.push(call.getPath());
      this.emit("cancelled", call.getPath());
    });
    this.emit("call", call);
  }
}

/** Echoes `x-echo*` request metadata as `x-echo*-initial` in initial and `-trailing` in trailing metadata. */
function echoMetadata(from: grpc.Metadata): { initial: grpc.Metadata; trailing: grpc.Metadata } {
  const initial = new grpc.Metadata();
  const trailing = new grpc.Metadata();
  for (const [key, values] of Object.entries(from.toJSON())) {
    if (!key.startsWith("x-echo")) continue;
    const bin = key.endsWith("-bin");
    const base = bin ? key.slice(0, -4) : key;
    for (const v of values) {
      initial.add(`${base}-initial${bin ? "-bin" : ""}`, v);
      trailing.add(`${base}-trailing${bin ? "-bin" : ""}`, v);
    }
  }
  return { initial, trailing };
}

/** How many attempts came before this one (grpc-js' retry policy says so in the metadata). */
export function retryAttempt(call: { readonly metadata: grpc.Metadata }): number {
  return Number(call.metadata.get("grpc-previous-rpc-attempts")[0] ?? 0);
}

function deadlineInMs(call: { getDeadline(): grpc.Deadline }): number | null {
  const d = call.getDeadline();
  const ms = d instanceof Date ? d.getTime() : d;
  return Number.isFinite(ms) ? ms - Date.now() : null;
}

function failure(fail: NonNullable<Req["fail"]>, trailing: grpc.Metadata): Partial<grpc.StatusObject> {
  return { code: fail.code, details: fail.details, metadata: trailing };
}

function reply(text: string, call: { getDeadline(): grpc.Deadline }, pad?: number): Res {
  return { text, deadlineInMs: deadlineInMs(call), ...(pad ? { pad: "x".repeat(pad) } : {}) };
}

export function testHandlers(rec: TestServiceRecorder): grpc.UntypedServiceImplementation {
  return {
    unary(call: grpc.ServerUnaryCall<Req, Res>, callback: grpc.sendUnaryData<Res>) {
      rec.observe(call);
      const req = call.request;
      if (req.hang || (req.hangFirst && retryAttempt(call) === 0)) return;
      const md = echoMetadata(call.metadata);
      call.sendMetadata(md.initial);
      if (req.fail) return callback(failure(req.fail, md.trailing), null);
      callback(null, reply(`unary:${req.text}`, call, req.pad), md.trailing);
    },
    serverStream(call: grpc.ServerWritableStream<Req, Res>) {
      rec.observe(call);
      const req = call.request;
      if (req.hang) return;
      const md = echoMetadata(call.metadata);
      call.sendMetadata(md.initial);
      for (let i = 0; i < (req.count ?? 0); i++) call.write(reply(`${req.text}#${i}`, call, req.pad));
      if (req.hold) return;
      if (req.fail) return void call.emit("error", failure(req.fail, md.trailing));
      call.end(md.trailing);
    },
    clientStream(call: grpc.ServerReadableStream<Req, Res>, callback: grpc.sendUnaryData<Res>) {
      rec.observe(call);
      const md = echoMetadata(call.metadata);
      call.sendMetadata(md.initial);
      const texts: string[] = [];
      let fail: Req["fail"];
      call.on("data", (req: Req) => {
        texts.push(req.text ?? "");
        fail ??= req.fail;
      });
      call.on("end", () => {
        if (fail) return callback(failure(fail, md.trailing), null);
        callback(null, reply(texts.join(","), call), md.trailing);
      });
    },
    bidi(call: grpc.ServerDuplexStream<Req, Res>) {
      rec.observe(call);
      const md = echoMetadata(call.metadata);
      call.sendMetadata(md.initial);
      call.on("data", (req: Req) => {
        if (req.fail) {
          call.emit("error", failure(req.fail, md.trailing));
          return;
        }
        call.write(reply(String(req.text).toUpperCase(), call, req.pad));
      });
      call.on("end", () => call.end(md.trailing));
    },
  };
}

/** A grpc.Server with the test service and the recorder of what its handlers saw. */
export function testServer(serverOptions: grpc.ServerOptions = {}): {
  server: grpc.Server;
  recorder: TestServiceRecorder;
} {
  const recorder = new TestServiceRecorder();
  const server = new grpc.Server(serverOptions);
  server.addService(testService, testHandlers(recorder));
  return { server, recorder };
}
