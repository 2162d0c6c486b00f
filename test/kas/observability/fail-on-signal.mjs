// Preloaded into a daemon by process-errors.test.ts: SIGUSR2 plays a bug. The first one leaves a
// promise rejected with nobody to handle it, the second throws where nothing catches.
let signals = 0;
process.on("SIGUSR2", () => {
  signals += 1;
  if (signals === 1) void Promise.reject(new Error("a promise nobody awaited"));
  else throw new Error("a callback that threw");
});
