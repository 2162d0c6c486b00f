// The one hop-by-hop rule both proxies use: any raw header list in, and what comes out is exactly
// its end-to-end lines (order, case and repetition kept), never a hop-by-hop name, a name its
// Connection headers list (any case, repeated, comma-spaced), or the identity header.
import fc from "fast-check";
import { expect, test } from "vitest";
import {
  connectionTokens,
  endToEnd,
  endToEndLines,
  HOP_BY_HOP,
  IDENTITY_HEADER,
  isEndToEnd,
  linesToHeaders,
} from "../../../tool/http/proxy/hop-by-hop.ts";

const cased = (names: fc.Arbitrary<string>) =>
  fc
    .tuple(names, fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }))
    .map(([n, up]) => [...n].map((c, i) => (up[i] ? c.toUpperCase() : c)).join(""));
const name = cased(
  fc.oneof(
    // "close": the usual Connection value, also usable as a header name that it then lists.
    fc.constantFrom(...HOP_BY_HOP, IDENTITY_HEADER, "content-length", "impersonate-user", "accept", "close"),
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
        // A generated line may itself be a Connection header: its value lists names too.
        const ownLines = headers
          .filter(([n]) => n.toLowerCase() === "connection")
          .map(([, v]) => v.split(","));
        const listed = new Set(
          [...connections, ...ownLines]
            .flat()
            .map((n) => n.trim().toLowerCase())
            .filter(Boolean),
        );
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

test("property: a response's headers (an object) keep exactly their end-to-end names, lowercased", () => {
  fc.assert(
    fc.property(
      fc.dictionary(
        name,
        fc.oneof(value, fc.array(value, { maxLength: 3 }), fc.nat(), fc.constant(undefined)),
      ),
      fc.option(fc.array(name, { maxLength: 3 }), { nil: undefined }),
      fc.constantFrom("connection", "Connection"),
      (headers, listed, connectionName) => {
        const input: Record<string, string | string[] | number | undefined> = { ...headers };
        if (listed !== undefined) input[connectionName] = listed.join(", ");
        const tokens = new Set(
          Object.entries(input)
            .filter(([n, v]) => n.toLowerCase() === "connection" && v !== undefined)
            .flatMap(([, v]) => [v].flat().map(String))
            .flatMap((line) => line.split(","))
            .map((t) => t.trim().toLowerCase())
            .filter(Boolean),
        );
        const expected: Record<string, unknown> = {};
        for (const [n, v] of Object.entries(input)) {
          const l = n.toLowerCase();
          if (v !== undefined && !HOP_BY_HOP.has(l) && !tokens.has(l)) expected[l] = v;
        }
        expect(endToEnd(input)).toEqual(expected);
      },
    ),
  );
});

test("a lone Connection: close still drops a header named close, as any listed name", () => {
  expect(endToEndLines(["Connection", "close", "Close", "1", "Accept", "a"])).toEqual(["Accept", "a"]);
  expect(endToEnd({ connection: "close", close: "1", accept: "a" })).toEqual({ accept: "a" });
  expect(endToEnd({ connection: "keep-alive", "keep-alive": "timeout=5", accept: "a" })).toEqual({
    accept: "a",
  });
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

// The property above takes its expectations from HOP_BY_HOP itself; these name the headers outright,
// so a name dropped from the list (proxy-authorization is a credential) fails here.
const RFC_9110_AND_OURS = [
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "expect",
  "host",
];

test("the hop-by-hop headers are RFC 9110's (7.6.1) plus host and expect; the identity header is Kas-Identity", () => {
  expect([...HOP_BY_HOP].sort()).toEqual([...RFC_9110_AND_OURS].sort());
  expect(IDENTITY_HEADER).toBe("kas-identity");
  const raw = [...RFC_9110_AND_OURS, "Kas-Identity"].flatMap((n) => [n.toUpperCase(), "v"]);
  expect(endToEndLines([...raw, "Accept", "*/*"])).toEqual(["Accept", "*/*"]);
});

test("Connection tokens: trimmed, lowercased, empty ones skipped, from one line or several", () => {
  expect([...connectionTokens(" Keep-Alive , X-Foo,,")]).toEqual(["keep-alive", "x-foo"]);
  expect([...connectionTokens(["close", "X-A, x-b"])]).toEqual(["close", "x-a", "x-b"]);
  expect([...connectionTokens(undefined)]).toEqual([]);
  expect([...connectionTokens("")]).toEqual([]);
});

test("isEndToEnd: any case of a hop-by-hop or a Connection-listed name is not", () => {
  const tokens = new Set(["x-hop"]);
  expect(isEndToEnd("Proxy-Authorization", tokens)).toBe(false);
  expect(isEndToEnd("X-HOP", tokens)).toBe(false);
  expect(isEndToEnd("Accept", tokens)).toBe(true);
  expect(isEndToEnd("X-Other", new Set())).toBe(true);
});

test("raw lines: a name listed in Connection goes in any case; a value that merely names a header does not", () => {
  const raw = [
    "connection",
    " X-Hop , keep-alive",
    "x-hop",
    "1",
    "X-Note",
    "connection",
    "X-Other",
    "x-note",
  ];
  expect(endToEndLines(raw)).toEqual(["X-Note", "connection", "X-Other", "x-note"]);
  expect(endToEndLines(["Content-Length", "5", "Accept", "a"], { upgrade: true })).toEqual(["Accept", "a"]);
  expect(endToEndLines(["Content-Length", "5"])).toEqual(["Content-Length", "5"]);
});

test("a response's headers (an object): hop-by-hop, Connection-listed and unset ones go; names come out lowercase", () => {
  expect(
    endToEnd({
      Connection: "close, X-Hop",
      "X-Hop": "1",
      "Keep-Alive": "timeout=5",
      "Transfer-Encoding": "chunked",
      "Content-Type": "text/plain",
      "X-Unset": undefined,
      "Set-Cookie": ["a=1", "b=2"],
    }),
  ).toEqual({ "content-type": "text/plain", "set-cookie": ["a=1", "b=2"] });
  expect(endToEnd({})).toEqual({});
  // Unset values leave no key behind; values that name other headers, or an unset Connection, drop nothing.
  expect(Object.keys(endToEnd({ "x-unset": undefined, accept: "a" }))).toEqual(["accept"]);
  expect(endToEnd({ "x-a": "x-b", "x-b": "1", connection: undefined, undefined: "v" })).toEqual({
    "x-a": "x-b",
    "x-b": "1",
    undefined: "v",
  });
});
