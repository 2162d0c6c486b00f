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
