// Our proto/gitaly must say on the wire exactly what Gitaly's own files say: every service, method,
// message, field and enum value we declare is compared with Debian's golang-gitaly-proto-dev (an old
// Gitaly, 1.37: fields that exist there have kept their numbers since). Both sides are compiled by
// buf into descriptor sets, so imports, nesting and type references are resolved the same way.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { describe, expect, test } from "vitest";

const GITALY_PROTO_DIR = "/usr/share/gocode/src/gitlab.com/gitlab-org/gitaly-proto";
const BUF = "node_modules/.bin/buf";

interface FieldDescriptor {
  name: string;
  number: number;
  label?: string;
  type?: string;
  typeName?: string;
  proto3Optional?: boolean;
}
interface EnumDescriptor {
  name: string;
  value?: { name: string; number: number }[];
}
interface MessageDescriptor {
  name: string;
  field?: FieldDescriptor[];
  nestedType?: MessageDescriptor[];
  enumType?: EnumDescriptor[];
}
interface MethodDescriptor {
  name: string;
  inputType: string;
  outputType: string;
  clientStreaming?: boolean;
  serverStreaming?: boolean;
}
interface FileDescriptor {
  name: string;
  package?: string;
  messageType?: MessageDescriptor[];
  enumType?: EnumDescriptor[];
  service?: { name: string; method?: MethodDescriptor[] }[];
}
interface DescriptorSet {
  file: FileDescriptor[];
}

/** What one element says on the wire, by its full name (".gitaly.TreeEntry.oid"). */
type WireFacts = Map<string, string>;

function field(f: FieldDescriptor): string {
  const optional = f.proto3Optional ? " proto3_optional" : "";
  return `field #${f.number} ${f.label ?? "LABEL_OPTIONAL"} ${f.type ?? "?"}${f.typeName ? ` ${f.typeName}` : ""}${optional}`;
}

function addEnum(facts: WireFacts, prefix: string, e: EnumDescriptor): void {
  const name = `${prefix}.${e.name}`;
  facts.set(name, "enum");
  for (const v of e.value ?? []) facts.set(`${name}.${v.name}`, `enum value ${v.number}`);
}

function addMessage(facts: WireFacts, prefix: string, m: MessageDescriptor): void {
  const name = `${prefix}.${m.name}`;
  facts.set(name, "message");
  for (const f of m.field ?? []) facts.set(`${name}.${f.name}`, field(f));
  for (const nested of m.nestedType ?? []) addMessage(facts, name, nested);
  for (const e of m.enumType ?? []) addEnum(facts, name, e);
}

/** The wire facts of every element in package `gitaly`. */
function wireFacts(set: DescriptorSet): WireFacts {
  const facts: WireFacts = new Map();
  for (const file of set.file) {
    if (file.package !== "gitaly") continue;
    const prefix = ".gitaly";
    for (const m of file.messageType ?? []) addMessage(facts, prefix, m);
    for (const e of file.enumType ?? []) addEnum(facts, prefix, e);
    for (const s of file.service ?? []) {
      facts.set(`${prefix}.${s.name}`, "service");
      for (const m of s.method ?? []) {
        const inStream = m.clientStreaming ? "stream " : "";
        const outStream = m.serverStreaming ? "stream " : "";
        facts.set(
          `${prefix}.${s.name}.${m.name}`,
          `rpc (${inStream}${m.inputType}) returns (${outStream}${m.outputType})`,
        );
      }
    }
  }
  return facts;
}

/** Every element of `ours` that Gitaly lacks or declares differently, one line each. */
function wireDifferences(ours: WireFacts, gitaly: WireFacts): string[] {
  const out: string[] = [];
  for (const [name, said] of ours) {
    const theirs = gitaly.get(name);
    if (theirs === undefined) out.push(`${name}: ours is ${said}, Gitaly has no such element`);
    else if (theirs !== said) out.push(`${name}: ours is ${said}, Gitaly's is ${theirs}`);
  }
  return out;
}

function build(dir: string, ...args: string[]): DescriptorSet {
  const json = execFileSync(BUF, ["build", dir, ...args, "-o", "-#format=json"], {
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });
  return JSON.parse(json) as DescriptorSet;
}

describe("proto/gitaly against Gitaly's own protos", () => {
  test.skipIf(!existsSync(GITALY_PROTO_DIR))(
    "every service, method, message, field and enum value we declare is Gitaly's",
    () => {
      const ours = wireFacts(build("proto", "--path", "proto/gitaly"));
      const gitaly = wireFacts(build(GITALY_PROTO_DIR));
      // The subset kas calls is all there (a proto file emptied by mistake would compare clean).
      for (const name of [
        ".gitaly.SmartHTTPService.InfoRefsUploadPack",
        ".gitaly.CommitService.FindCommit",
        ".gitaly.CommitService.TreeEntry",
        ".gitaly.CommitService.GetTreeEntries",
        ".gitaly.Repository.gl_project_path",
        ".gitaly.TreeEntryRequest.limit",
        ".gitaly.TreeEntryResponse.size",
        ".gitaly.BlobService.GetBlobs",
        ".gitaly.GetBlobsRequest.revision_paths",
        ".gitaly.GetBlobsRequest.RevisionPath.path",
        ".gitaly.GetBlobsRequest.limit",
        ".gitaly.GetBlobsResponse.size",
        ".gitaly.GetBlobsResponse.data",
        ".gitaly.GetBlobsResponse.oid",
        ".gitaly.GetBlobsResponse.is_submodule",
        ".gitaly.GetBlobsResponse.path",
      ]) {
        expect(ours.has(name), name).toBe(true);
      }
      expect(wireDifferences(ours, gitaly)).toEqual([]);
    },
  );

  test("the comparison names the element that differs", () => {
    const base: DescriptorSet = {
      file: [
        {
          name: "x.proto",
          package: "gitaly",
          messageType: [
            {
              name: "TreeEntryRequest",
              field: [{ name: "limit", number: 4, label: "LABEL_OPTIONAL", type: "TYPE_INT64" }],
              enumType: [{ name: "Kind", value: [{ name: "BLOB", number: 1 }] }],
            },
          ],
          service: [
            {
              name: "CommitService",
              method: [
                { name: "TreeEntry", inputType: ".gitaly.A", outputType: ".gitaly.B", serverStreaming: true },
              ],
            },
          ],
        },
      ],
    };
    const gitaly = wireFacts(base);
    const mutate = (f: (s: DescriptorSet) => void): string[] => {
      const copy = structuredClone(base);
      f(copy);
      return wireDifferences(wireFacts(copy), gitaly);
    };
    const message = (s: DescriptorSet) => s.file[0]!.messageType![0]!;
    expect(mutate(() => {})).toEqual([]);
    expect(
      mutate((s) => {
        message(s).field![0]!.number = 5;
      }),
    ).toEqual([
      ".gitaly.TreeEntryRequest.limit: ours is field #5 LABEL_OPTIONAL TYPE_INT64, Gitaly's is field #4 LABEL_OPTIONAL TYPE_INT64",
    ]);
    expect(
      mutate((s) => {
        message(s).field![0]!.type = "TYPE_INT32";
      }),
    ).toHaveLength(1);
    expect(
      mutate((s) => {
        message(s).field![0]!.label = "LABEL_REPEATED";
      }),
    ).toHaveLength(1);
    expect(
      mutate((s) => {
        message(s).field![0]!.name = "max";
      }),
    ).toEqual([
      ".gitaly.TreeEntryRequest.max: ours is field #4 LABEL_OPTIONAL TYPE_INT64, Gitaly has no such element",
    ]);
    expect(
      mutate((s) => {
        message(s).enumType![0]!.value![0]!.number = 2;
      }),
    ).toEqual([".gitaly.TreeEntryRequest.Kind.BLOB: ours is enum value 2, Gitaly's is enum value 1"]);
    expect(
      mutate((s) => {
        s.file[0]!.service![0]!.method![0]!.serverStreaming = false;
      }),
    ).toEqual([
      ".gitaly.CommitService.TreeEntry: ours is rpc (.gitaly.A) returns (.gitaly.B), Gitaly's is rpc (.gitaly.A) returns (stream .gitaly.B)",
    ]);
    expect(
      mutate((s) => {
        s.file[0]!.service![0]!.method![0]!.inputType = ".gitaly.C";
      }),
    ).toHaveLength(1);
  });
});
