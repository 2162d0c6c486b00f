// The test server's environment slugs are Rails': the expected values are what Rails'
// Gitlab::Slug::Environment#generate returns (computed with Ruby's Digest::SHA2 and Integer#to_s(36)).
import { expect, test } from "vitest";
import { environmentSlug } from "./environment-slug.ts";

test.each([
  ["production", "production"], // already a slug: unchanged
  ["PRODUCTION", "production-vl4voz"], // changed: suffixed
  ["review/1-foo", "review-1-foo-9tdj0u"],
  ["1-foo", "env-1-foo-1k46wz"], // must start with a letter
  ["*-foo", "env-foo-i1o6om"],
  ["foo-", "foo"], // unchanged but for the trailing dash
  ["foo--bar", "foo-bar-q006cp"], // dashes squeezed
  ["staging-1234567890123456", "staging-1234567890123456"], // 24 characters
  ["staging-1234567890123456-", "staging-123456789-y52hkh"], // longer: shortened
  ["staging-12345678-", "staging-12345678"],
  ["review/feature-x", "review-feature-x-bjrazc"],
])("%s -> %s", (name, slug) => {
  expect(environmentSlug(name)).toBe(slug);
});
