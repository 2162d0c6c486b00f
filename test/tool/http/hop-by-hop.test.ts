// The one hop-by-hop rule both proxies use: any raw header list in, and what comes out is exactly
// its end-to-end lines (order, case and repetition kept), never a hop-by-hop name, a name its
// Connection headers list (any case, repeated, comma-spaced), or the identity header.
import fc from "fast-check";
import { expect, test } from "vitest";
import {
  endToEndLines,
  HOP_BY_HOP,
  IDENTITY_HEADER,
  linesToHeaders,
} from "../../../tool/http/proxy/hop-by-hop.ts";

const cased = (names: fc.Arbitrary<string>) =>
  fc
    .tuple(names, fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }))
    .map(([n, up]) => [...n].map((c, i) => (up[i] ? c.toUpperCase() : c)).join(""));
const name = cased(
  fc.oneof(
    fc.constantFrom(...HOP_BY_HOP, IDENTITY_HEADER, "content-length", "impersonate-user", "accept"),
    fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/),
  ),
);
const value = fc.stringMatching(/^[ -~]{0,20}$/);

test("property: exactly the end-to-end lines, in order", () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(name, value), { maxLength: 12 }),
      fc.array(fc.array(name, { maxLength: 4 }), { maxLength: 3 }),
      fc.constantFrom(",", ", ", " , ", ",,"),
      fc.boolean(),
      (headers, connections, sep, upgrade) => {
        const raw = headers.flat();
        for (const names of connections)
          raw.push(connections.length % 2 ? "Connection" : "CONNECTION", names.join(sep));
        const listed = new Set(connections.flat().map((n) => n.toLowerCase()));
        const out = endToEndLines(raw, { upgrade, drop: (n) => n === "accept" });
        const expected = headers
          .filter(([n]) => {
            const l = n.toLowerCase();
            return (
              !HOP_BY_HOP.has(l) &&
              !listed.has(l) &&
              l !== IDENTITY_HEADER &&
              l !== "accept" &&
              !(upgrade && l === "content-length")
            );
          })
          .flat();
        expect(out).toEqual(expected);
      },
    ),
  );
});

test("repeated lines stay repeated: node:http sends a list as one line per value", () => {
  expect(
    linesToHeaders([
      "Impersonate-Group",
      "a",
      "accept",
      "x",
      "impersonate-group",
      "b",
      "IMPERSONATE-GROUP",
      "c",
    ]),
  ).toEqual({
    "impersonate-group": ["a", "b", "c"],
    accept: "x",
  });
});
