// Which request targets a proxy may append to a base path: any path of plain segments; never one
// with a dot segment (raw or percent-encoded, in any case) or an encoded separator, wherever it stands.
import fc from "fast-check";
import { expect, test } from "vitest";
import { isPlainPath } from "../../../tool/http/serve/request-target.ts";

const segment = fc
  .stringMatching(/^[A-Za-z0-9_~:@!$&'()*+,;=-][A-Za-z0-9._~:@!$&'()*+,;=-]{0,12}$/)
  .filter((s) => !/^\.+$/.test(s));
const dotted = fc.constantFrom(".", "..", "%2e", "%2E%2e", ".%2e", "%2e.");
const separator = fc.constantFrom("%2f", "%2F", "%5c", "%5C", "\\");

test("property: plain segments pass; one dot segment or encoded separator anywhere does not", () => {
  fc.assert(
    fc.property(
      fc.array(segment, { maxLength: 6 }),
      fc.nat(),
      dotted,
      separator,
      fc.string(),
      (segs, at, dot, sep, query) => {
        const path = `/${segs.join("/")}`;
        expect(isPlainPath(`${path}?${query}`)).toBe(true);
        const i = segs.length === 0 ? 0 : at % (segs.length + 1);
        expect(isPlainPath(`/${[...segs.slice(0, i), dot, ...segs.slice(i)].join("/")}`)).toBe(false);
        expect(isPlainPath(`/${[...segs.slice(0, i), `a${sep}b`, ...segs.slice(i)].join("/")}`)).toBe(false);
      },
    ),
  );
  expect(isPlainPath("http://h/x")).toBe(false); // absolute-form
  expect(isPlainPath("*")).toBe(false);
});

/** The rule spelled out segment by segment, as isPlainPath's slow path reads every target it cannot pass at a glance. */
function plainBySegments(target: string): boolean {
  const query = target.indexOf("?");
  const path = query < 0 ? target : target.slice(0, query);
  if (!path.startsWith("/") || path.includes("\\") || /%(2f|5c)/i.test(path)) return false;
  return path.split("/").every((s) => !/^(\.|%2e){1,2}$/i.test(s));
}

test("property: any target, of the characters that matter, is judged as segment by segment", () => {
  const target = fc
    .array(fc.constantFrom("/", ".", "%", "2", "e", "E", "f", "F", "5", "c", "\\", "?", "a", "\n"), {
      maxLength: 16,
    })
    .map((cs) => cs.join(""));
  fc.assert(
    fc.property(target, (t) => {
      expect(isPlainPath(t)).toBe(plainBySegments(t));
    }),
    { numRuns: 2000 },
  );
  expect(isPlainPath("/api/v1/namespaces/default/pods?limit=500")).toBe(true);
  expect(isPlainPath("/api/v1/x?../..")).toBe(true); // the query is not the path
  expect(isPlainPath("")).toBe(false);
});
