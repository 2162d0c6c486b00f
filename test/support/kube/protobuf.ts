// kubectl 1.32 sends built-in objects it builds itself (`kubectl create namespace|configmap|secret|
// serviceaccount`) as Kubernetes protobuf (`application/vnd.kubernetes.protobuf`), not JSON, and
// does not fall back on a 415. This decodes that envelope for the few kinds whose messages are small
// enough to describe here (field numbers from the public Kubernetes API definitions). Other kinds
// get a 415 naming the kinds that are understood.
import { StoreError } from "./store.ts";

type FieldType = "string" | "bytes" | "bool" | "int" | "time" | "stringMap" | "bytesMap" | Message;
interface Field {
  name: string;
  type: FieldType;
  repeated?: boolean;
}
interface Message {
  [number: number]: Field;
}

const OWNER_REFERENCE: Message = {
  1: { name: "kind", type: "string" },
  3: { name: "name", type: "string" },
  4: { name: "uid", type: "string" },
  5: { name: "apiVersion", type: "string" },
  6: { name: "controller", type: "bool" },
  7: { name: "blockOwnerDeletion", type: "bool" },
};

const OBJECT_META: Message = {
  1: { name: "name", type: "string" },
  2: { name: "generateName", type: "string" },
  3: { name: "namespace", type: "string" },
  5: { name: "uid", type: "string" },
  6: { name: "resourceVersion", type: "string" },
  7: { name: "generation", type: "int" },
  8: { name: "creationTimestamp", type: "time" },
  11: { name: "labels", type: "stringMap" },
  12: { name: "annotations", type: "stringMap" },
  13: { name: "ownerReferences", type: OWNER_REFERENCE, repeated: true },
  14: { name: "finalizers", type: "string", repeated: true },
};

const KINDS: Record<string, Message> = {
  Namespace: {
    1: { name: "metadata", type: OBJECT_META },
    2: { name: "spec", type: { 1: { name: "finalizers", type: "string", repeated: true } } },
  },
  ConfigMap: {
    1: { name: "metadata", type: OBJECT_META },
    2: { name: "data", type: "stringMap" },
    3: { name: "binaryData", type: "bytesMap" },
    4: { name: "immutable", type: "bool" },
  },
  Secret: {
    1: { name: "metadata", type: OBJECT_META },
    2: { name: "data", type: "bytesMap" },
    3: { name: "type", type: "string" },
    4: { name: "stringData", type: "stringMap" },
    5: { name: "immutable", type: "bool" },
  },
  ServiceAccount: {
    1: { name: "metadata", type: OBJECT_META },
    2: {
      name: "secrets",
      type: {
        1: { name: "kind", type: "string" },
        2: { name: "namespace", type: "string" },
        3: { name: "name", type: "string" },
      },
      repeated: true,
    },
    3: { name: "imagePullSecrets", type: { 1: { name: "name", type: "string" } }, repeated: true },
    4: { name: "automountServiceAccountToken", type: "bool" },
  },
};

const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]); // "k8s\0"

class Reader {
  #pos = 0;
  constructor(readonly buf: Buffer) {}
  get done() {
    return this.#pos >= this.buf.length;
  }
  varint(): number {
    let result = 0;
    let shift = 1;
    for (;;) {
      const byte = this.buf[this.#pos++];
      if (byte === undefined) throw malformed();
      result += (byte & 0x7f) * shift;
      if ((byte & 0x80) === 0) return result;
      shift *= 128;
    }
  }
  bytes(): Buffer {
    const length = this.varint();
    const out = this.buf.subarray(this.#pos, this.#pos + length);
    if (out.length !== length) throw malformed();
    this.#pos += length;
    return out;
  }
  skip(wireType: number): void {
    if (wireType === 0) this.varint();
    else if (wireType === 2) this.bytes();
    else if (wireType === 1) this.#pos += 8;
    else if (wireType === 5) this.#pos += 4;
    else throw malformed();
  }
}

function malformed() {
  return new StoreError(400, "BadRequest", "the protobuf body could not be decoded");
}

function decode(buf: Buffer, message: Message): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const r = new Reader(buf);
  while (!r.done) {
    const tag = r.varint();
    const number = Math.floor(tag / 8);
    const wireType = tag & 7;
    const field = message[number];
    if (!field) {
      r.skip(wireType);
      continue;
    }
    let value: unknown;
    if (field.type === "int" || field.type === "bool") {
      const n = r.varint();
      value = field.type === "bool" ? n !== 0 : n;
    } else {
      const bytes = r.bytes();
      if (field.type === "string") value = bytes.toString("utf8");
      else if (field.type === "bytes") value = bytes.toString("base64");
      else if (field.type === "time") {
        const t = decode(bytes, { 1: { name: "seconds", type: "int" } }) as { seconds?: number };
        value = new Date((t.seconds ?? 0) * 1000).toISOString().replace(/\.\d+Z$/, "Z");
      } else if (field.type === "stringMap" || field.type === "bytesMap") {
        const entry = decode(bytes, {
          1: { name: "key", type: "string" },
          2: { name: "value", type: field.type === "stringMap" ? "string" : "bytes" },
        });
        const map = (out[field.name] ?? {}) as Record<string, unknown>;
        map[String(entry.key ?? "")] = entry.value ?? "";
        out[field.name] = map;
        continue;
      } else value = decode(bytes, field.type);
    }
    if (field.repeated) out[field.name] = [...((out[field.name] as unknown[]) ?? []), value];
    else out[field.name] = value;
  }
  return out;
}

/** The JSON form of a Kubernetes protobuf body (`k8s\0` + runtime.Unknown). */
export function decodeKubernetesProtobuf(body: Buffer): Record<string, unknown> {
  if (!body.subarray(0, 4).equals(MAGIC)) throw malformed();
  const unknown = decode(body.subarray(4), {
    1: {
      name: "typeMeta",
      type: { 1: { name: "apiVersion", type: "string" }, 2: { name: "kind", type: "string" } },
    },
    2: { name: "raw", type: "bytes" },
  }) as { typeMeta?: { apiVersion?: string; kind?: string }; raw?: string };
  const kind = unknown.typeMeta?.kind ?? "";
  const schema = KINDS[kind];
  if (!schema || unknown.typeMeta?.apiVersion !== "v1") {
    throw new StoreError(
      415,
      "UnsupportedMediaType",
      `the test server decodes protobuf only for v1 ${Object.keys(KINDS).join(", ")}, not ${unknown.typeMeta?.apiVersion}/${kind}: send JSON`,
    );
  }
  return {
    apiVersion: "v1",
    kind,
    ...decode(Buffer.from(unknown.raw ?? "", "base64"), schema),
  };
}
