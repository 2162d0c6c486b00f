// The SPDY/3 header-compression dictionary (SPDY/3 draft, section 2.6.10.1), byte-exact: zlib
// refuses a header block compressed against any other (its adler32 is in the block's zlib header).
// Written here as the spec lays it out, length-prefixed words then plain text, rather than as 1423
// opaque bytes; spdy.test.ts checks its sha256 against the bytes of moby/spdystream's
// spdy/dictionary.go (the copy kubectl uses).

/** Each word is stored as a 4-byte big-endian length, then its ASCII bytes. */
const WORDS = [
  "options",
  "head",
  "post",
  "put",
  "delete",
  "trace",
  "accept",
  "accept-charset",
  "accept-encoding",
  "accept-language",
  "accept-ranges",
  "age",
  "allow",
  "authorization",
  "cache-control",
  "connection",
  "content-base",
  "content-encoding",
  "content-language",
  "content-length",
  "content-location",
  "content-md5",
  "content-range",
  "content-type",
  "date",
  "etag",
  "expect",
  "expires",
  "from",
  "host",
  "if-match",
  "if-modified-since",
  "if-none-match",
  "if-range",
  "if-unmodified-since",
  "last-modified",
  "location",
  "max-forwards",
  "pragma",
  "proxy-authenticate",
  "proxy-authorization",
  "range",
  "referer",
  "retry-after",
  "server",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "user-agent",
  "vary",
  "via",
  "warning",
  "www-authenticate",
  "method",
  "get",
  "status",
  "200 OK",
  "version",
  "HTTP/1.1",
  "url",
  "public",
  "set-cookie",
  "keep-alive",
  "origin",
];

/** Then, with no length prefixes: status codes, reason phrases, dates, common values. */
const TEXT = [
  "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505",
  "203 Non-Authoritative Information",
  "204 No Content",
  "301 Moved Permanently",
  "400 Bad Request",
  "401 Unauthorized",
  "403 Forbidden",
  "404 Not Found",
  "500 Internal Server Error",
  "501 Not Implemented",
  "503 Service Unavailable",
  "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec ",
  "00:00:00 ",
  "Mon, Tue, Wed, Thu, Fri, Sat, Sun, ",
  "GMT",
  "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,text/javascript,",
  "public",
  "private",
  "max-age=",
  "gzip,deflate,sdch",
  "charset=utf-8",
  "charset=iso-8859-1,utf-,*,enq=0.",
].join("");

function build(): Buffer {
  const parts: Buffer[] = [];
  for (const word of WORDS) {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(word.length);
    parts.push(length, Buffer.from(word, "latin1"));
  }
  parts.push(Buffer.from(TEXT, "latin1"));
  return Buffer.concat(parts);
}

export const SPDY3_DICTIONARY: Buffer = build();
/** sha256 of the dictionary in moby/spdystream (what client-go, hence kubectl, compresses with). */
export const SPDY3_DICTIONARY_SHA256 = "51d27341373f923f3cd88e1eb7162aeaa3723d7585ff2399201dc06498407f02";
