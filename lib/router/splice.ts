import type { Duplex } from "node:stream";

/**
 * Joins two streams: bytes flow both ways, an end (FIN) on one side ends the other's writable
 * side, and a reset or error on either destroys (resets) the other. Resolves once both closed.
 */
export function splice(a: Duplex, b: Duplex): Promise<void> {
  const closed = Promise.all([whenClosed(a), whenClosed(b)]).then(() => {});
  a.pipe(b);
  b.pipe(a);
  relayAbort(a, b);
  relayAbort(b, a);
  return closed;
}

function whenClosed(s: Duplex): Promise<void> {
  return new Promise((resolve) => {
    if (s.closed) resolve();
    else s.once("close", () => resolve());
  });
}

/**
 * When `from` closes without having finished both directions cleanly, reset `to`. Also when it
 * closed cleanly but `to` has not ended: a socket that does not allow half-open connections (a
 * client's TCP or TLS socket) ends its writable side as soon as its peer's FIN arrives, so it can
 * close before `to` has. What `to` still sends has nowhere to go (`pipe` stopped reading it when
 * `from` closed), and left alone `to` would never end nor close.
 */
function relayAbort(from: Duplex, to: Duplex): void {
  from.on("error", () => {}); // the error is relayed as a reset; nothing else listens
  const onClose = () => {
    const clean = from.readableEnded && from.writableFinished;
    if ((!clean || !to.readableEnded) && !to.destroyed) to.destroy();
  };
  if (from.closed) onClose();
  else from.once("close", onClose);
}
