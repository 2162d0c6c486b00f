// flat() changes a string's representation, never its value.
import { randomUUID } from "node:crypto";
import { expect, test } from "vitest";
import { flat } from "../../../modules/runtime/index.ts";

test("flat gives the same string back: a UUID, a long JSON text, the empty string", () => {
  const uuid = randomUUID();
  expect(flat(uuid)).toBe(uuid);
  const json = JSON.stringify({ a: "x".repeat(1000), b: [1, 2, 3] });
  expect(flat(json)).toBe(json);
  expect(JSON.parse(flat(json))).toEqual({ a: "x".repeat(1000), b: [1, 2, 3] });
  expect(flat("")).toBe("");
});
