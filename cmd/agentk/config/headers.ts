const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Set by the handshake itself (or carrying the token): an extra header must not replace them. */
const FORBIDDEN_HEADERS =
  /^(authorization|host|connection|upgrade|content-length|transfer-encoding|sec-websocket-.*)$/i;

/** `--kas-header "Name: value"` values into a header map; bad ones reported through `fail`. */
export function parseKasHeaders(
  specs: readonly string[],
  field: string,
  fail: (field: string, message: string) => void,
): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const spec of specs) {
    const colon = spec.indexOf(":");
    const name = colon === -1 ? "" : spec.slice(0, colon).trim();
    if (!HEADER_NAME.test(name))
      fail(field, `expected "Name: value", got ${JSON.stringify(spec.slice(0, 40))}`);
    else if (FORBIDDEN_HEADERS.test(name)) fail(field, `${name} cannot be set: the handshake sets it`);
    else headers[name] = spec.slice(colon + 1).trim();
  }
  return headers;
}
