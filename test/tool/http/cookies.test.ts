// The Cookie header reader every front uses (the dashboard's session, the Kubernetes API proxy's
// `_gitlab_kas`): by property over headers built from known pairs, then the rules one at a time.
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { cookieValue, readCookies } from "../../../tool/http/serve/cookies.ts";

/** RFC 6265 token characters, a few names alike enough to repeat and to prefix each other. */
const names = fc.oneof(
  fc.constantFrom("a", "ab", "b", "_gitlab_kas", "kas_dashboard_session"),
  fc.stringMatching(/^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,12}$/),
);
/** Anything but ";" (which always separates), even "=", quotes and inner spaces; no outer whitespace. */
const inners = fc.string({ maxLength: 24 }).filter((v) => !v.includes(";") && v.trim() === v);
const ows = fc.constantFrom("", " ", "  ", "\t", " \t ");
/** A piece of the header that is not a pair: no "=" in it. */
const junk = fc.stringMatching(/^[ a-z]{0,6}$/);

interface Sent {
  name: string;
  /** As written in the header. */
  wire: string;
  /** What a reader must give back. */
  value: string;
}

const pairs: fc.Arbitrary<Sent> = fc
  .record({ name: names, inner: inners, quoted: fc.boolean(), before: ows, after: ows })
  .filter(({ inner, quoted }) => quoted || !/^".*"$/s.test(inner))
  .map(({ name, inner, quoted, before, after }) => ({
    name,
    wire: `${before}${name}=${before}${quoted ? `"${inner}"` : inner}${after}`,
    value: inner,
  }));

const headers = fc
  .array(fc.oneof({ weight: 5, arbitrary: pairs }, { weight: 1, arbitrary: junk }), { maxLength: 8 })
  .map((pieces) => ({
    header: pieces.map((p) => (typeof p === "string" ? p : p.wire)).join(";"),
    sent: pieces.filter((p): p is Sent => typeof p !== "string"),
  }));

describe("property", () => {
  test("every pair is read back in order: name and value trimmed, one pair of outer quotes removed", () => {
    fc.assert(
      fc.property(headers, ({ header, sent }) => {
        expect(readCookies(header)).toEqual(sent.map(({ name, value }) => ({ name, value })));
      }),
    );
  });

  test("cookieValue is the FIRST pair of that name; undefined when none has it", () => {
    fc.assert(
      fc.property(headers, names, ({ header, sent }, other) => {
        for (const name of [...sent.map((s) => s.name), other]) {
          expect(cookieValue(header, name)).toBe(sent.find((s) => s.name === name)?.value);
        }
      }),
    );
  });

  test("any header at all: no throw, and cookieValue agrees with readCookies", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 60 }), fc.string({ maxLength: 6 }), (header, name) => {
        expect(cookieValue(header, name)).toBe(readCookies(header).find((c) => c.name === name)?.value);
      }),
    );
  });
});

describe("rules", () => {
  test("no header: no cookies", () => {
    expect(readCookies(undefined)).toEqual([]);
    expect(cookieValue(undefined, "a")).toBeUndefined();
  });

  test("a value holds everything after the first '=' (base64 padding, JWTs)", () => {
    expect(cookieValue("a=b=c==; d=e", "a")).toBe("b=c==");
  });

  test("repeated names: the first wins (the browser sends the most specific path first)", () => {
    expect(cookieValue("a=1; a=2", "a")).toBe("1");
    expect(readCookies("a=1; a=2")).toEqual([
      { name: "a", value: "1" },
      { name: "a", value: "2" },
    ]);
  });

  test("outer quotes only: one pair removed, inner ones kept, a lone quote kept", () => {
    expect(cookieValue('a="x y"', "a")).toBe("x y");
    expect(cookieValue('a=""x""', "a")).toBe('"x"');
    expect(cookieValue('a=x"y', "a")).toBe('x"y');
    expect(cookieValue('a="', "a")).toBe('"');
    expect(cookieValue('a=""', "a")).toBe("");
  });

  test("names are exact and case-sensitive; pieces without '=' are skipped", () => {
    expect(cookieValue("xa=no; A=no; ax=no; a; a=yes", "a")).toBe("yes");
    expect(cookieValue("=v", "")).toBe("v");
  });

  test("what the dashboard's tests read: the session out of a Set-Cookie value", () => {
    const setCookie = "kas_dashboard_session=eyJ.eyJ.sig; Path=/; HttpOnly; SameSite=Strict; Max-Age=43200";
    expect(cookieValue(setCookie, "kas_dashboard_session")).toBe("eyJ.eyJ.sig");
  });
});
