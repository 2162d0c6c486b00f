// agentk's shutdown steps: a part that fails to close is logged by name, and the rest still close.
import { expect, test } from "vitest";
import { createLogger } from "../../cmd/agentk/observability/index.ts";
import { shutDown } from "../../cmd/agentk/shutdown.ts";

function capture() {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger({
    level: "info",
    destination: { write: (l: string) => void lines.push(JSON.parse(l)) },
  });
  return { log, lines };
}

test("a close failure is logged with the step's name; later steps still close; the result says it failed", async () => {
  const { log, lines } = capture();
  const closed: string[] = [];
  const ok = await shutDown(
    [
      {
        name: "agent",
        close: () => Promise.reject(new Error("tunnel would not close")),
      },
      {
        name: "observability server",
        close: async () => {
          closed.push("observability server");
        },
      },
    ],
    log,
  );
  expect(ok).toBe(false);
  expect(closed).toEqual(["observability server"]);
  expect(lines).toEqual([
    expect.objectContaining({
      level: 50,
      msg: "failed to close on shutdown",
      step: "agent",
      err: expect.objectContaining({ message: "tunnel would not close" }),
    }),
  ]);
});

test("every step closed: true, nothing logged", async () => {
  const { log, lines } = capture();
  expect(await shutDown([{ name: "agent", close: async () => {} }], log)).toBe(true);
  expect(lines).toEqual([]);
});
