/**
 * The client went away before its answer was complete (closed the connection, was reset, was
 * killed). Not the daemon's failure, nor anyone's to act on: the guard logs it at debug level and
 * records 499, never a warning or an error, since any client can leave as often as it likes.
 */
export class ClientGoneError extends Error {
  override name = "ClientGoneError";

  constructor(message = "the client went away before the answer was complete") {
    super(message);
  }
}
