// The HEAD file as the ref cache reads it (ref-cache.ts headState): whatever it holds, a ref it
// names stays inside the git directory and is one git accepts; anything else is left to git.
import { join, relative } from "node:path";
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { refNameProblem } from "../../../cmd/kas/repositories/git-names.ts";
import { headState } from "../../../cmd/kas/repositories/ref-cache.ts";

const GITDIR = "/srv/repo.git";
const segment = fc.stringMatching(/^[a-z0-9._-]{1,12}$/);

describe("headState", () => {
  test("a symbolic HEAD names its ref, a commit id is detached, anything else is git's to read", () => {
    expect(headState("ref: refs/heads/main\n")).toEqual({ ref: "refs/heads/main" });
    expect(headState(`${"a".repeat(40)}\n`)).toEqual({ detached: true });
    expect(headState(`${"b".repeat(64)}`)).toEqual({ detached: true });
    expect(headState("ref: refs/heads/../../../etc/passwd\n")).toBeUndefined();
    expect(headState("ref: HEAD\n")).toBeUndefined();
    expect(headState(`${"A".repeat(40)}\n`)).toBeUndefined();
    expect(headState("")).toBeUndefined();
  });

  test("whatever HEAD holds, a ref it names is one git accepts and stays inside the git directory", () => {
    const text = fc.oneof(
      fc.string(),
      fc
        .array(fc.oneof(segment, fc.constantFrom("..", ".", "", "/", "\\", "\0", " ")), { maxLength: 6 })
        .map((parts) => `ref: refs/${parts.join("/")}\n`),
    );
    fc.assert(
      fc.property(text, (t) => {
        const state = headState(t);
        if (state === undefined || !("ref" in state)) return;
        expect(refNameProblem(state.ref.slice("refs/".length))).toBeUndefined();
        const rel = relative(GITDIR, join(GITDIR, state.ref));
        expect(rel.startsWith("..")).toBe(false);
        expect(rel.startsWith("refs/")).toBe(true);
      }),
    );
  });

  test("every valid branch name written by git symbolic-ref is read back", () => {
    fc.assert(
      fc.property(fc.array(segment, { minLength: 1, maxLength: 4 }), (parts) => {
        const name = parts.join("/");
        fc.pre(refNameProblem(`heads/${name}`) === undefined);
        expect(headState(`ref: refs/heads/${name}\n`)).toEqual({ ref: `refs/heads/${name}` });
      }),
    );
  });
});
