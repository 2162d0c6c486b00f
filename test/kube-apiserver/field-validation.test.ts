// Field validation of the Kubernetes test server (validation.ts): unknown fields found anywhere in
// an object, with the real server's paths, and nothing reported for declared ones.
import { readFile } from "node:fs/promises";
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { parseAllDocuments } from "yaml";
import { unknownFields } from "../support/kube/validation.ts";

type Json = Record<string, unknown>;

/** Every object in `value` that sits under a declared field (not map values: labels, data, ...), with its path. */
function objectsIn(value: unknown, path: string, out: [string, Json][]): [string, Json][] {
  if (Array.isArray(value)) value.forEach((v, i) => void objectsIn(v, `${path}[${i}]`, out));
  else if (value !== null && typeof value === "object") {
    out.push([path, value as Json]);
    for (const [k, v] of Object.entries(value)) {
      if (["labels", "annotations", "matchLabels", "data", "limits", "requests"].includes(k)) continue;
      objectsIn(v, path === "" ? k : `${path}.${k}`, out);
    }
  }
  return out;
}

describe("unknownFields", async () => {
  const docs = parseAllDocuments(await readFile("deploy/kas/deployment.yaml", "utf8"));
  const deployment = docs[0]!.toJS() as Json;
  const nodes = objectsIn(deployment, "", []);

  test("a full Deployment whose fields are all declared: nothing to report", () => {
    expect(nodes.length).toBeGreaterThan(20);
    expect(unknownFields(deployment, "apps/v1", "Deployment")).toEqual([]);
  });

  test("a field added anywhere is reported at its path, and only it", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: nodes.length - 1 }),
        fc.stringMatching(/^[a-z][a-zA-Z]{0,12}$/).map((s) => `zz${s}`),
        fc.oneof(fc.string(), fc.integer(), fc.constant({ nested: true })),
        (index, key, value) => {
          const copy = structuredClone(deployment);
          const [path] = nodes[index]!;
          const target = objectsIn(copy, "", [])[index]![1];
          target[key] = value;
          expect(unknownFields(copy, "apps/v1", "Deployment")).toEqual([
            path === "" ? key : `${path}.${key}`,
          ]);
        },
      ),
    );
  });

  test("map values are free; strategic merge patch directives are not fields", () => {
    const patch = {
      metadata: { labels: { anything: "goes" }, annotations: { "a/b": "c" } },
      spec: { template: { spec: { $setElementOrder: [], containers: [{ name: "x", $patch: "delete" }] } } },
    };
    expect(unknownFields(patch, "apps/v1", "Deployment")).toEqual([]);
  });

  test("kinds without a schema (custom resources) are not checked; core v1 Event is", () => {
    expect(unknownFields({ spec: { whatever: 1 } }, "example.com/v1", "Widget")).toEqual([]);
    expect(unknownFields({ reasonn: "x" }, "v1", "Event")).toEqual(["reasonn"]);
  });
});
