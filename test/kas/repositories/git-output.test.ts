// The local backend's parsers of git output, and its check of ref names, property-tested: random
// input never throws anything but a GitOutputError, valid output round-trips, and the name check
// agrees with `git check-ref-format` itself.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { refNameProblem } from "../../../cmd/kas/repositories/git-names.ts";
import {
  type BatchCheckResult,
  GitOutputError,
  type LsTreeEntry,
  parseBatch,
  parseBatchCheck,
  parseForEachRef,
  parseLsTree,
  type RefRecord,
} from "../../../cmd/kas/repositories/git-output.ts";

const hex = (length: number) =>
  fc.string({ unit: fc.constantFrom(..."0123456789abcdef"), minLength: length, maxLength: length });
const oidArb = fc.oneof(hex(40), hex(64));
const typeArb = fc.constantFrom("blob", "tree", "commit", "tag") as fc.Arbitrary<RefRecord["type"]>;
/** Strings that survive UTF-8 encoding unchanged (no lone surrogates), without the excluded characters. */
const textArb = (exclude: RegExp, minLength = 1) =>
  fc
    .string({ unit: "binary", minLength, maxLength: 40 })
    .filter((s) => !exclude.test(s) && Buffer.from(s).toString() === s);

/** Runs `parse`, accepting a result or a GitOutputError, nothing else. */
function onlyGitOutputErrors(parse: () => unknown): void {
  try {
    parse();
  } catch (err) {
    if (!(err instanceof GitOutputError)) throw err;
    expect(err.message).toMatch(/^unexpected \S+ output: /);
  }
}

/** Valid output with random bytes spliced in: closer to the parser's paths than pure noise. */
const corrupted = (valid: fc.Arbitrary<Buffer>) =>
  fc
    .tuple(valid, fc.nat(), fc.nat({ max: 8 }), fc.uint8Array({ maxLength: 8 }))
    .map(([buf, at, cut, bytes]) => {
      const i = buf.length === 0 ? 0 : at % buf.length;
      return Buffer.concat([buf.subarray(0, i), Buffer.from(bytes), buf.subarray(i + cut)]);
    });

describe("ls-tree -z output", () => {
  const entryArb: fc.Arbitrary<LsTreeEntry> = fc
    .record({
      kind: fc.constantFrom(
        ["100644", "blob"],
        ["100755", "blob"],
        ["120000", "blob"],
        ["040000", "tree"],
        ["160000", "commit"],
      ),
      oid: oidArb,
      path: textArb(/\0/),
    })
    .map(({ kind, oid, path }) => ({ mode: kind[0]!, type: kind[1] as LsTreeEntry["type"], oid, path }));
  const format = (entries: LsTreeEntry[]): Buffer =>
    Buffer.from(entries.map((e) => `${e.mode} ${e.type} ${e.oid}\t${e.path}\0`).join(""));

  it("valid output round-trips (paths with tabs, spaces, newlines, any UTF-8)", () => {
    fc.assert(
      fc.property(fc.array(entryArb, { maxLength: 20 }), (entries) => {
        expect(parseLsTree(format(entries))).toEqual(entries);
      }),
    );
  });

  it("random or corrupted output: a result or a GitOutputError", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) =>
        onlyGitOutputErrors(() => parseLsTree(Buffer.from(bytes))),
      ),
    );
    fc.assert(
      fc.property(corrupted(fc.array(entryArb, { maxLength: 5 }).map(format)), (buf) =>
        onlyGitOutputErrors(() => parseLsTree(buf)),
      ),
    );
  });

  it("skips a path that is not UTF-8, refuses an unterminated entry", () => {
    const oid = "a".repeat(40);
    const out = Buffer.concat([
      Buffer.from(`100644 blob ${oid}\t`),
      Buffer.from([0xff, 0xfe]),
      Buffer.from(`\u0000100644 blob ${oid}\tok\u0000`),
    ]);
    expect(parseLsTree(out)).toEqual([{ mode: "100644", type: "blob", oid, path: "ok" }]);
    expect(() => parseLsTree(Buffer.from(`100644 blob ${oid}\tx`))).toThrow(GitOutputError);
  });
});

describe("for-each-ref output", () => {
  const recordArb: fc.Arbitrary<RefRecord> = fc
    .record({
      refname: textArb(/[\0\n]/).map((s) => `refs/${s}`),
      oid: oidArb,
      type: typeArb,
      peeled: fc.option(fc.record({ oid: oidArb, type: typeArb }), { nil: undefined }),
    })
    .map(({ refname, oid, type, peeled }) =>
      peeled ? { refname, oid, type: "tag" as const, peeled } : { refname, oid, type },
    );
  const format = (records: RefRecord[]): string =>
    records
      .map((r) => `${[r.refname, r.oid, r.type, r.peeled?.oid ?? "", r.peeled?.type ?? ""].join("\0")}\n`)
      .join("");

  it("valid output round-trips", () => {
    fc.assert(
      fc.property(fc.array(recordArb, { maxLength: 10 }), (records) => {
        expect(parseForEachRef(format(records))).toEqual(records);
      }),
    );
  });

  it("random or corrupted output: a result or a GitOutputError", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 300 }), (s) =>
        onlyGitOutputErrors(() => parseForEachRef(s)),
      ),
    );
    fc.assert(
      fc.property(
        corrupted(fc.array(recordArb, { maxLength: 4 }).map((r) => Buffer.from(format(r)))),
        (buf) => onlyGitOutputErrors(() => parseForEachRef(buf.toString())),
      ),
    );
  });
});

describe("cat-file --batch-check output", () => {
  const answerArb = fc.record({
    input: textArb(/\n/),
    result: fc.oneof(
      fc.constant({ found: false } as BatchCheckResult),
      fc.record({
        found: fc.constant(true),
        oid: oidArb,
        type: typeArb,
        size: fc.nat(),
      }) as fc.Arbitrary<BatchCheckResult>,
    ),
  });
  const format = (answers: { input: string; result: BatchCheckResult }[]): string =>
    answers
      .map(({ input, result: r }) => (r.found ? `${r.oid} ${r.type} ${r.size}\n` : `${input} missing\n`))
      .join("");

  it("valid output round-trips", () => {
    fc.assert(
      fc.property(fc.array(answerArb, { maxLength: 10 }), (answers) => {
        expect(
          parseBatchCheck(
            format(answers),
            answers.map((a) => a.input),
          ),
        ).toEqual(answers.map((a) => a.result));
      }),
    );
  });

  it("random output, or a line count that does not match the inputs: a result or a GitOutputError", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "binary", maxLength: 200 }),
        fc.array(textArb(/\n/), { maxLength: 3 }),
        (s, inputs) => onlyGitOutputErrors(() => parseBatchCheck(s, inputs)),
      ),
    );
    expect(() => parseBatchCheck(`${"a".repeat(40)} blob 3\n`, [])).toThrow(/1 lines for 0 inputs/);
  });
});

describe("cat-file --batch output", () => {
  const blobArb = fc.record({
    oid: oidArb,
    content: fc.uint8Array({ maxLength: 40 }).map((a) => Buffer.from(a)),
  });
  const format = (blobs: { oid: string; content: Buffer }[]): Buffer =>
    Buffer.concat(
      blobs.flatMap((b) => [
        Buffer.from(`${b.oid} blob ${b.content.length}\n`),
        b.content,
        Buffer.from("\n"),
      ]),
    );
  const expected = (blobs: { oid: string; content: Buffer }[]) =>
    blobs.map((b) => ({ oid: b.oid, size: b.content.length }));

  it("valid output round-trips (contents with NUL, LF, anything)", () => {
    fc.assert(
      fc.property(fc.array(blobArb, { maxLength: 10 }), (blobs) => {
        expect(parseBatch(format(blobs), expected(blobs))).toEqual(blobs.map((b) => b.content));
      }),
    );
    const tricky = { oid: "a".repeat(40), content: Buffer.from(`\n${"b".repeat(40)} blob 0\n\0`) };
    expect(parseBatch(format([tricky]), expected([tricky]))).toEqual([tricky.content]);
  });

  it("corrupted output, a missing object, a wrong size or extra bytes: a result or a GitOutputError", () => {
    fc.assert(
      fc.property(
        fc
          .array(blobArb, { minLength: 1, maxLength: 4 })
          .chain((blobs) => fc.tuple(fc.constant(blobs), corrupted(fc.constant(format(blobs))))),
        ([blobs, out]) => onlyGitOutputErrors(() => parseBatch(out, expected(blobs))),
      ),
    );
    const oid = "c".repeat(40);
    expect(() => parseBatch(Buffer.from(`${oid} missing\n`), [{ oid, size: 1 }])).toThrow(GitOutputError);
    expect(() => parseBatch(Buffer.from(`${oid} blob 2\nab\n`), [{ oid, size: 3 }])).toThrow(GitOutputError);
    expect(() => parseBatch(Buffer.from(`${oid} blob 1\na\nx`), [{ oid, size: 1 }])).toThrow(
      /after the last/,
    );
    expect(() => parseBatch(Buffer.from(`${oid} blob 3\nab`), [{ oid, size: 3 }])).toThrow(/cut short/);
  });
});

describe("ref name check", () => {
  const run = promisify(execFile);
  const gitAccepts = (refname: string) =>
    run("git", ["check-ref-format", refname]).then(
      () => true,
      () => false,
    );
  // Names built from the characters the rules are about, so both outcomes are common.
  const nameArb = fc.string({
    unit: fc.constantFrom(..."ab./-@{}^~:?*[\\ \t\x7f", "é", ".lock", "HEAD"),
    maxLength: 12,
  });

  it("agrees with `git check-ref-format refs/heads/<name>` (we also refuse '-x', 'HEAD' and '@')", async () => {
    await fc.assert(
      fc.asyncProperty(nameArb, async (name) => {
        const ours = refNameProblem(name) === undefined;
        const extra = name.startsWith("-") || name === "HEAD" || name === "@";
        expect(ours).toBe((await gitAccepts(`refs/heads/${name}`)) && !extra);
      }),
      { numRuns: 300 },
    );
  });
});
