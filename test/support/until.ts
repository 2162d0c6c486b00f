/** Resolves once `predicate` holds, polling every 20 ms, or rejects after `ms`. */
export async function until(
  predicate: () => boolean | Promise<boolean>,
  ms = 5000,
  what = "condition",
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`${what} not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
