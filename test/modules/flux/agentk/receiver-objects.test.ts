// GitLab's Receiver and Secret for a GitRepository: names within Kubernetes' bounds, owned by it.
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  type GitRepository,
  owningRepository,
  prefixedName,
  receiver,
  receiverSecret,
} from "../../../../modules/flux/agentk/receiver-objects.ts";

const repository = (name: string): GitRepository => ({
  apiVersion: "source.toolkit.fluxcd.io/v1",
  kind: "GitRepository",
  metadata: { name, namespace: "apps", uid: "u-1" },
});

describe("prefixedName (GitLab's objectWithPrefix)", () => {
  test("short names get the prefix; long ones are cut and end alphanumerically", () => {
    expect(prefixedName("app", 63)).toBe("gitlab-app");
    expect(prefixedName("a".repeat(60), 63)).toBe(`gitlab-${"a".repeat(56)}`);
    expect(prefixedName(`${"a".repeat(55)}-bbbb`, 63)).toBe(`gitlab-${"a".repeat(54)}-x`);
  });

  test("property: RFC 1123 names stay within n characters, start with gitlab- and end alphanumerically", () => {
    const name = fc.stringMatching(/^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/);
    fc.assert(
      fc.property(name, fc.integer({ min: 10, max: 253 }), (n, max) => {
        const out = prefixedName(n, max);
        expect(out.length).toBeLessThanOrEqual(max);
        expect(out.startsWith("gitlab-")).toBe(true);
        expect(out).toMatch(/[A-Za-z0-9]$/);
      }),
      { numRuns: 500 },
    );
  });
});

describe("the objects", () => {
  test("the Receiver names its GitRepository, its Secret and its project; both are owned by the GitRepository", () => {
    const secret = receiverSecret("42", repository("app"));
    const r = receiver("42", repository("app"), "group/app", secret.metadata.name);
    expect(secret.metadata.name).toBe("gitlab-receiver-app");
    expect(r.metadata.name).toBe("gitlab-app");
    expect(owningRepository(r)).toBe("app");
    expect(owningRepository(secret)).toBe("app");
    expect(r.metadata.annotations?.["agent.gitlab.com/project"]).toBe("group/app");
  });

  test("an object owned by something else, or by another group's GitRepository, is not ours to follow", () => {
    const owned = (apiVersion: string, kind: string) => ({
      metadata: { ownerReferences: [{ apiVersion, kind, name: "x", uid: "u", controller: true }] },
    });
    expect(owningRepository(owned("apps/v1", "Deployment"))).toBeUndefined();
    expect(owningRepository(owned("example.com/v1", "GitRepository"))).toBeUndefined();
    expect(owningRepository(owned("source.toolkit.fluxcd.io/v1beta2", "GitRepository"))).toBe("x");
    expect(owningRepository({ metadata: {} })).toBeUndefined();
  });
});
