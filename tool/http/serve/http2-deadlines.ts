// Deadlines on HTTP/2 connections handed to a server that knows nothing of them (grpc-js' injected
// connections): closed if nothing authenticated comes over them, and never left half-closed.
import type { Duplex } from "node:stream";
import type { LimitReport } from "./limit-report.ts";

/**
 * Closes an HTTP/2 connection (`socket`) that has made no authenticated request within
 * `timeoutMs`; call `authenticated()` when one was.
 */
export function closeUnlessAuthenticated(
  socket: Duplex,
  timeoutMs: number,
  report?: LimitReport,
): { authenticated(): void } {
  const timer = setTimeout(() => {
    report?.("unauthenticated deadline");
    socket.destroy();
  }, timeoutMs);
  timer.unref();
  socket.once("close", () => clearTimeout(timer));
  return { authenticated: () => clearTimeout(timer) };
}

/**
 * Destroys `socket` once the server has ended its side and the peer has not closed its own within
 * `graceMs`: an HTTP/2 session closed gracefully (idle, age) only half-closes its socket, and a
 * peer that never answers with its FIN would hold it open.
 */
export function closeHalfClosed(socket: Duplex, graceMs = 1000): void {
  socket.once("finish", () => setTimeout(() => socket.destroy(), graceMs).unref());
}
