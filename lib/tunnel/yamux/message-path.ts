/**
 * Shortcuts a message-based connection (the tunnel's WebSocket) may offer beside its Duplex, so a
 * session skips the Duplex's stream machinery for each message. The Duplex still carries the
 * lifecycle ('end', 'close', 'error', end(), destroy()) and every write that must wait.
 *
 * Why: without it, each message of a small echo crosses a Readable (push, a nextTick to read more)
 * and a Writable (write, its completion) twice per round trip, which dominates bench:tunnel's 64 B
 * echo.
 */
export interface MessagePath {
  /**
   * From the next tick on, each inbound message goes to `onMessage` instead of the Duplex's
   * readable side; the bytes already buffered there go first (possibly joined into one chunk). The
   * readable side still ends when the connection does.
   */
  receive(onMessage: (message: Buffer) => void): void;
  /**
   * Sends `message` at once if nothing is waiting before it (no write queued in the Duplex, none
   * in the socket below): returns false otherwise, and the caller writes it to the Duplex. So a
   * congested connection is still seen as such by whoever writes.
   */
  sendNow(message: Buffer): boolean;
}
