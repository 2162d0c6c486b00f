// The stand-in kas as a process of its own, for tests that kill it: `--port N --token T`.
// Prints one JSON line per event: {"event":"listening","url":...}, {"event":"handshake",...}, {"event":"session"}.
import { parseArgs } from "node:util";
import { startStandInKas } from "./stand-in-kas.ts";

const { values } = parseArgs({ options: { port: { type: "string" }, token: { type: "string" } } });
const kas = await startStandInKas({ token: values.token ?? "", port: Number(values.port ?? 0) });
const print = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);
kas.events.on("handshake", () =>
  print({ event: "handshake", authorized: kas.handshakes.at(-1)?.authorized }),
);
kas.events.on("session", () => print({ event: "session" }));
print({ event: "listening", url: kas.url });
process.once("SIGTERM", () => void kas.close().then(() => process.exit(0)));
