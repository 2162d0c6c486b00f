import { generate } from "selfsigned";

export interface TestPki {
  /** PEM of the test CA that signed `cert`. */
  caCert: string;
  /** Server certificate for localhost, tunnel.test, 127.0.0.1 and ::1. */
  cert: string;
  key: string;
}

let cached: Promise<TestPki> | undefined;

/** A throwaway CA and a server certificate it signed (EC P-256: fast to make), shared per test file. */
export function testPki(): Promise<TestPki> {
  cached ??= makePki();
  return cached;
}

/** A new CA and server certificate, not shared: e.g. to rotate a test server's certificate. */
export async function makePki(): Promise<TestPki> {
  const notBeforeDate = new Date(Date.now() - 60_000);
  const notAfterDate = new Date(Date.now() + 24 * 3600_000);
  const ca = await generate([{ name: "commonName", value: "tunnel test CA" }], {
    keyType: "ec",
    algorithm: "sha256",
    notBeforeDate,
    notAfterDate,
    extensions: [
      { name: "basicConstraints", cA: true, critical: true },
      { name: "keyUsage", keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  const server = await generate([{ name: "commonName", value: "localhost" }], {
    keyType: "ec",
    algorithm: "sha256",
    notBeforeDate,
    notAfterDate,
    ca: { key: ca.private, cert: ca.cert },
    extensions: [
      { name: "basicConstraints", cA: false },
      { name: "keyUsage", digitalSignature: true, keyEncipherment: true },
      { name: "extKeyUsage", serverAuth: true },
      {
        name: "subjectAltName",
        altNames: [
          { type: 2, value: "localhost" },
          { type: 2, value: "tunnel.test" },
          { type: 7, ip: "127.0.0.1" },
          { type: 7, ip: "::1" },
        ],
      },
    ],
  });
  return { caCert: ca.cert, cert: server.cert, key: server.private };
}
