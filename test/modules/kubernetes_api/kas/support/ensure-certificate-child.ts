// A process of its own that makes or reads the proxy's certificate under a data directory shared
// with other such processes. With a new generation made and not yet published, it says `built` and
// waits for `publish` on stdin, so a test can hold several at that point and let them race.
// Prints, as one JSON line, the paths ensureCertificate returned and the files' contents it read.
import { readFile } from "node:fs/promises";
import { createInterface } from "node:readline";
import { ensureCertificate } from "../../../../../modules/kubernetes_api/kas/certificate.ts";

const dataDir = process.argv[2]!;
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const paths = await ensureCertificate(dataDir, {
  beforePublish: async () => {
    process.stdout.write("built\n");
    const line = await lines.next();
    if (line.value !== "publish") throw new Error(`expected "publish", got ${String(line.value)}`);
  },
});
const read = (path: string) => readFile(path, "utf8");
const out = {
  paths,
  ca: await read(paths.caFile),
  cert: await read(paths.certificateFile),
  key: await read(paths.keyFile),
};
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(0);
