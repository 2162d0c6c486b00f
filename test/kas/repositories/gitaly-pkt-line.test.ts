import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  encodePktLine,
  FLUSH,
  PktLineError,
  splitPktLines,
} from "../../../cmd/kas/repositories/gitaly/pkt-line.ts";
import {
  encodeRefAdvertisement,
  headTarget,
  parseRefAdvertisement,
  type RefAdvertisement,
} from "../../../cmd/kas/repositories/gitaly/ref-advertisement.ts";

const hexOid = fc.stringMatching(/^[0-9a-f]{40}$/);
const refName = fc
  .array(fc.stringMatching(/^[A-Za-z0-9._\-é]{1,12}$/), { minLength: 1, maxLength: 4 })
  .map((parts) => `refs/${parts.join("/")}`);
const capability = fc.stringMatching(/^[a-z0-9=:/\-_.]{1,20}$/);

const advertisement: fc.Arbitrary<RefAdvertisement> = fc
  .record({
    refs: fc.uniqueArray(fc.tuple(refName, hexOid), { selector: ([n]) => n, maxLength: 20 }),
    peel: fc.array(fc.tuple(fc.boolean(), hexOid), { maxLength: 20 }),
    capabilities: fc.array(capability, { maxLength: 6 }),
  })
  .map(({ refs, peel, capabilities }) => ({
    refs: new Map(refs),
    peeled: new Map(
      refs.flatMap(([name], i) => (peel[i]?.[0] ? [[name, peel[i][1]] as [string, string]] : [])),
    ),
    capabilities,
  }));

describe("pkt-line", () => {
  test("splits data and flush packets", () => {
    const data = Buffer.concat([encodePktLine("hello\n"), encodePktLine(FLUSH), encodePktLine("")]);
    expect(splitPktLines(data)).toEqual([Buffer.from("hello\n"), FLUSH, Buffer.alloc(0)]);
    expect(encodePktLine("a").toString()).toBe("0005a");
  });

  test.each([
    ["truncated length", "00"],
    ["non-hex length", "zzzzhello"],
    ["upper-case hex is not git's", "000Ahello\n"],
    ["length past the end", "0010abc"],
    ["v2 delimiter", "0001"],
    ["length below 4", "0003"],
  ])("%s is a PktLineError", (_, input) => {
    expect(() => splitPktLines(Buffer.from(input))).toThrow(PktLineError);
  });

  test("random bytes never throw anything but a PktLineError", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        for (const parse of [splitPktLines, parseRefAdvertisement]) {
          try {
            parse(Buffer.from(bytes));
          } catch (err) {
            if (!(err instanceof PktLineError)) throw err;
          }
        }
      }),
      { numRuns: 2000 },
    );
  });

  test("mostly valid framing with random payloads never throws anything but a PktLineError", () => {
    const pkt = fc.oneof(
      fc.uint8Array({ maxLength: 60 }).map((b) => encodePktLine(Buffer.from(b))),
      fc.constant(encodePktLine(FLUSH)),
      hexOid.map((oid) => encodePktLine(`${oid} refs/heads/x^{}\n`)),
    );
    fc.assert(
      fc.property(fc.array(pkt, { maxLength: 8 }), (pkts) => {
        try {
          parseRefAdvertisement(Buffer.concat(pkts));
        } catch (err) {
          if (!(err instanceof PktLineError)) throw err;
        }
      }),
      { numRuns: 2000 },
    );
  });
});

describe("ref advertisement", () => {
  test("generated advertisements round-trip, with and without the service preamble", () => {
    fc.assert(
      fc.property(advertisement, fc.boolean(), (adv, preamble) => {
        const data = encodeRefAdvertisement(adv, preamble ? "git-upload-pack" : undefined);
        const back = parseRefAdvertisement(data);
        expect(back.refs).toEqual(adv.refs);
        expect(back.peeled).toEqual(adv.peeled);
        expect(back.capabilities).toEqual(adv.capabilities);
      }),
    );
  });

  test("git's own form: HEAD's symref, an annotated tag, an empty repository", () => {
    const a = "a".repeat(40);
    const t = "b".repeat(40);
    const data = Buffer.concat([
      encodePktLine("# service=git-upload-pack\n"),
      encodePktLine(FLUSH),
      encodePktLine(`${a} HEAD\0multi_ack symref=HEAD:refs/heads/main agent=git/2.39\n`),
      encodePktLine(`${a} refs/heads/main\n`),
      encodePktLine(`${t} refs/tags/v1\n`),
      encodePktLine(`${a} refs/tags/v1^{}\n`),
      encodePktLine(FLUSH),
    ]);
    const adv = parseRefAdvertisement(data);
    expect(headTarget(adv)).toBe("refs/heads/main");
    expect(adv.refs.get("refs/tags/v1")).toBe(t);
    expect(adv.peeled.get("refs/tags/v1")).toBe(a);

    const empty = parseRefAdvertisement(
      Buffer.concat([
        encodePktLine(`${"0".repeat(40)} capabilities^{}\0agent=git/2.39\n`),
        encodePktLine(FLUSH),
      ]),
    );
    expect(empty.refs.size).toBe(0);
    expect(empty.capabilities).toEqual(["agent=git/2.39"]);
  });

  test.each([
    ["no flush at the end", [`${"a".repeat(40)} HEAD\0caps\n`]],
    ["no capabilities on the first line", [`${"a".repeat(40)} HEAD\n`, FLUSH]],
    ["short object id", [`abc HEAD\0caps\n`, FLUSH]],
    [
      "peeled line before its tag",
      [`${"a".repeat(40)} HEAD\0\n`, `${"a".repeat(40)} refs/tags/x^{}\n`, FLUSH],
    ],
    ["preamble without flush", ["# service=git-upload-pack\n", `${"a".repeat(40)} HEAD\0\n`, FLUSH]],
  ] as const)("%s is a PktLineError", (_, lines) => {
    const data = Buffer.concat(lines.map((l) => encodePktLine(l)));
    expect(() => parseRefAdvertisement(data)).toThrow(PktLineError);
  });
});
