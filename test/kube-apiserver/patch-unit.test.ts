// The patch formats and the field-ownership model on their own, for cases kubectl does not easily produce.
import { describe, expect, test } from "vitest";
import { fieldSet, pathString, serverSideApply, toFieldsV1 } from "../support/kube/apply.ts";
import { jsonPatch, mergePatch, strategicMergePatch } from "../support/kube/patch.ts";
import type { KubeObject, StoreError } from "../support/kube/store.ts";

describe("patch formats", () => {
  test("JSON merge patch: null deletes, objects merge, arrays replace", () => {
    expect(mergePatch({ a: 1, b: { c: 2, d: 3 }, e: [1, 2] }, { a: null, b: { c: 9 }, e: [3] })).toEqual({
      b: { c: 9, d: 3 },
      e: [3],
    });
  });

  test("JSON patch: every operation, escaped pointers, failed test", () => {
    const doc = { metadata: { labels: { "app.kubernetes.io/name": "x" } }, list: [1, 2] };
    expect(
      jsonPatch(doc, [
        { op: "add", path: "/list/-", value: 3 },
        { op: "add", path: "/list/0", value: 0 },
        { op: "remove", path: "/metadata/labels/app.kubernetes.io~1name" },
        { op: "copy", from: "/list", path: "/copy" },
        { op: "move", from: "/copy", path: "/moved" },
        { op: "replace", path: "/list/1", value: 10 },
        { op: "test", path: "/moved/3", value: 3 },
      ]),
    ).toEqual({ metadata: { labels: {} }, list: [0, 10, 2, 3], moved: [0, 1, 2, 3] });
    expect(() => jsonPatch(doc, [{ op: "test", path: "/list/0", value: 5 }])).toThrow(
      /test operation failed/,
    );
    expect(() => jsonPatch(doc, [{ op: "remove", path: "/nope/x" }])).toThrow(/does not exist/);
  });

  test("strategic merge patch: keyed lists, $patch delete and replace, $setElementOrder, $retainKeys, finalizers", () => {
    const original = {
      metadata: { finalizers: ["a"] },
      spec: {
        strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: 1 } },
        containers: [
          { name: "app", image: "app:1", env: [{ name: "A", value: "1" }] },
          { name: "side", image: "side:1" },
        ],
        args: ["x", "y"],
      },
    };
    expect(
      strategicMergePatch(original, {
        metadata: { finalizers: ["b", "a"] },
        spec: {
          strategy: { $retainKeys: ["type"], type: "Recreate" },
          "$setElementOrder/containers": [{ name: "new" }, { name: "app" }],
          containers: [
            { name: "app", env: [{ name: "B", value: "2" }] },
            { name: "side", $patch: "delete" },
            { name: "new", image: "new:1" },
          ],
          args: ["z"],
        },
      }),
    ).toEqual({
      metadata: { finalizers: ["a", "b"] },
      spec: {
        strategy: { type: "Recreate" },
        containers: [
          { name: "new", image: "new:1" },
          {
            name: "app",
            image: "app:1",
            env: [
              { name: "A", value: "1" },
              { name: "B", value: "2" },
            ],
          },
        ],
        args: ["z"],
      },
    });
    expect(
      strategicMergePatch(original, {
        spec: { containers: [{ $patch: "replace" }, { name: "only", image: "o" }] },
      }),
    ).toMatchObject({ spec: { containers: [{ name: "only", image: "o" }] } });
    expect(strategicMergePatch({ f: ["a", "b", "c"] }, { "$deleteFromPrimitiveList/f": ["b"] })).toEqual({
      f: ["a", "c"],
    });
  });
});

describe("field ownership", () => {
  const scope = { custom: false, statusSubresource: true };
  type Spec = { template: { spec: { containers: { name: string; image: string }[] } } };
  const deployment = (containers: { name: string; image: string }[]): KubeObject => ({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "d", namespace: "default" },
    spec: { template: { spec: { containers } } },
  });
  const containers = (o: KubeObject) => (o.spec as Spec).template.spec.containers;
  const conflictsOf = (fn: () => unknown) => {
    try {
      fn();
    } catch (e) {
      const err = e as StoreError;
      return { code: err.code, causes: err.details?.causes?.map((c) => `${c.message}: ${c.field}`).sort() };
    }
    return undefined;
  };

  test("leaf paths: keyed list elements by their key, status left to its subresource", () => {
    const o = { ...deployment([{ name: "c", image: "i" }]), status: { x: 1 } };
    const fields = [...fieldSet(o, scope).values()];
    expect(toFieldsV1(fields)).toEqual({
      "f:spec": {
        "f:template": {
          "f:spec": { "f:containers": { 'k:{"name":"c"}': { ".": {}, "f:name": {}, "f:image": {} } } },
        },
      },
    });
    expect(pathString(fields.find((p) => p.at(-1) === "f:image") ?? [])).toBe(
      '.spec.template.spec.containers[name="c"].image',
    );
  });

  test("a container one manager stops applying goes; one another manager also applies stays; conflicts name every owner", () => {
    const a = { name: "a", image: "a" };
    const b = { name: "b", image: "b" };
    let o = serverSideApply(undefined, deployment([a, b]), "one", false, scope);
    o = serverSideApply(o, deployment([b]), "two", false, scope);
    o = serverSideApply(o, deployment([]), "one", false, scope);
    expect(containers(o)).toEqual([b]);
    // "one" co-owns "b" again (same value): a different image by a third manager conflicts with both.
    o = serverSideApply(o, deployment([b]), "one", false, scope);
    const clash = deployment([{ name: "b", image: "other" }]);
    expect(conflictsOf(() => serverSideApply(o, clash, "three", false, scope))).toEqual({
      code: 409,
      causes: [
        'conflict with "one": .spec.template.spec.containers[name="b"].image',
        'conflict with "two": .spec.template.spec.containers[name="b"].image',
      ],
    });
    const forced = serverSideApply(o, clash, "three", true, scope);
    expect(containers(forced)).toEqual([{ name: "b", image: "other" }]);
    // Forced: "one" and "two" no longer own the image, so they may drop "b" without removing it.
    const dropped = serverSideApply(forced, deployment([]), "two", false, scope);
    expect(containers(dropped)).toEqual([{ name: "b", image: "other" }]);
  });
});
