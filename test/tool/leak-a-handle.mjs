// Preloaded into a daemon by exit-deadline.test.ts: a listening socket nothing ever closes, as a
// leak in the daemon would leave one, so its event loop never empties by itself.
import { createServer } from "node:net";

createServer().listen(0, "127.0.0.1");
