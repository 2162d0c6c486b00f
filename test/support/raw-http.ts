import { connect } from "node:net";
import { connect as connectTls } from "node:tls";

export interface RawAnswer {
  /** e.g. "HTTP/1.1 400 Bad Request"; "" when the connection closed without a word. */
  statusLine: string;
  /** The status code, or 0 when there was no well-formed status line. */
  status: number;
  /** Header lines, lowercase names. */
  headers: Record<string, string>;
  /** The body as far as it came (up to content-length, the last chunk, or the close); chunked as sent. */
  body: string;
}

const STATUS_LINE = /^HTTP\/1\.[01] (\d{3}) [^\r\n]*$/;

/**
 * Writes `request` as is on a new connection to 127.0.0.1:`port` and reads the answer the way a
 * bare client would: complete once the head and the body (`content-length` bytes, or up to the last
 * chunk; none for HEAD, 1xx, 204 and 304) are in, or when the server closes. For requests no HTTP client library would send
 * (malformed paths, Upgrades). Rejects after `timeoutMs` without an answer.
 */
export function rawExchange(
  port: number,
  request: string | Buffer,
  timeoutMs = 5000,
  /** Over TLS, trusting this CA (PEM). */
  tls?: { ca: string },
): Promise<RawAnswer> {
  request = Buffer.from(request);
  const head = request.subarray(0, 5).toString("latin1") === "HEAD ";
  return new Promise((resolve, reject) => {
    const socket = tls
      ? connectTls({ port, host: "127.0.0.1", ca: tls.ca, servername: "localhost" })
      : connect(port, "127.0.0.1");
    let data = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms; got ${JSON.stringify(data.toString("latin1"))}`));
    }, timeoutMs);
    const finish = (answer: RawAnswer) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const parse = (closed: boolean) => {
      const text = data.toString("latin1");
      const end = text.indexOf("\r\n\r\n");
      if (end === -1) {
        if (closed) finish({ statusLine: text.split("\r\n")[0] ?? "", status: 0, headers: {}, body: "" });
        return;
      }
      const [statusLine = "", ...lines] = text.slice(0, end).split("\r\n");
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(":");
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const status = Number(STATUS_LINE.exec(statusLine)?.[1] ?? 0);
      const body = data.subarray(Buffer.byteLength(text.slice(0, end + 4), "latin1"));
      if (status === 100) {
        // An interim answer (Expect: 100-continue): the final one follows.
        data = body;
        return parse(closed);
      }
      const length = Number(headers["content-length"] ?? Number.NaN);
      const bodiless = head || status < 200 || status === 204 || status === 304;
      const chunked = /chunked/i.test(headers["transfer-encoding"] ?? "");
      const lastChunk = chunked && `\r\n${body.toString("latin1")}`.includes("\r\n0\r\n\r\n");
      if (closed || bodiless || lastChunk || body.length >= length) {
        finish({ statusLine, status, headers, body: body.toString() });
      }
    };
    socket.on("error", () => {}); // a reset shows as a close without an answer
    socket.on("data", (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      parse(false);
    });
    socket.on("close", () => parse(true));
    socket.write(request);
  });
}
