// The configuration loaders against arbitrary input: a valid configuration or a ConfigError whose
// every line names a field, never another exception.
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { agentkFlags } from "../../../cmd/agentk/config/flags.ts";
import { loadAgentkConfig } from "../../../cmd/agentk/config/index.ts";
import { buildKasConfig, envNameOf, KAS_FIELDS } from "../../../cmd/kas/config/index.ts";
import { ConfigError } from "../../../tool/config/errors.ts";
import { flagNameOf } from "../../../tool/config/flags.ts";
import { settingLeaves } from "../../../tool/config/settings.ts";

const scalar = fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null), fc.double());
const paths = KAS_FIELDS.map((f) => f.path);

/** A document that sets some real fields (to plausible or silly values) and some nonsense. */
const kasDocument = fc
  .array(fc.tuple(fc.oneof(fc.constantFrom(...paths), fc.string({ maxLength: 12 })), scalar), {
    maxLength: 12,
  })
  .map((entries) => {
    const doc: Record<string, unknown> = {};
    for (const [path, value] of entries) {
      let node = doc;
      const segments = path.split(".");
      for (const s of segments.slice(0, -1)) {
        if (typeof node[s] !== "object" || node[s] === null) node[s] = {};
        node = node[s] as Record<string, unknown>;
      }
      node[segments.at(-1)!] = value;
    }
    return doc;
  });

function expectConfigErrorOrValue(run: () => unknown): void {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    for (const issue of (err as ConfigError).issues) {
      expect(issue.field).not.toBe("");
      expect(issue.message).not.toBe("");
    }
  }
}

describe("configuration loaders on arbitrary input", () => {
  test("kas: any document and environment gives a configuration or a ConfigError naming fields", () => {
    fc.assert(
      fc.property(
        kasDocument,
        fc.dictionary(fc.constantFrom(...paths.map(envNameOf)), fc.string(), { maxKeys: 4 }),
        (doc, env) => expectConfigErrorOrValue(() => buildKasConfig(doc, env)),
      ),
      { numRuns: 400 },
    );
  });

  test("kas: a bad value is named by its YAML path and where it came from", () => {
    fc.assert(
      fc.property(fc.constantFrom(...KAS_FIELDS.filter((f) => f.meta.kind === "duration")), (field) => {
        const env = { [envNameOf(field.path)]: "soon", KAS_AGENT_STATIC_TOKENS_FILE: "/t" };
        try {
          buildKasConfig({}, env);
        } catch (err) {
          expect((err as ConfigError).issues).toContainEqual(
            expect.objectContaining({ field: field.path, source: envNameOf(field.path) }),
          );
          return;
        }
        throw new Error(`${field.path}: "soon" was accepted`);
      }),
    );
  });

  test("agentk: any argv gives a configuration or a ConfigError naming flags", async () => {
    const names = settingLeaves(agentkFlags).map((leaf) => `--${flagNameOf(leaf)}`);
    const argv = fc.array(fc.oneof(fc.constantFrom(...names), fc.string({ maxLength: 10 })), {
      maxLength: 8,
    });
    await fc.assert(
      fc.asyncProperty(argv, async (args) => {
        await loadAgentkConfig({ argv: args, env: {}, serviceAccountDir: "/nonexistent" }).catch(
          (err: unknown) => {
            expect(err).toBeInstanceOf(ConfigError);
            for (const issue of (err as ConfigError).issues) expect(issue.field).not.toBe("");
          },
        );
      }),
      { numRuns: 200 },
    );
  });
});
