import { readFile } from "node:fs/promises";
import { isIP } from "node:net";
import { type ConnectionOptions, checkServerIdentity, rootCertificates } from "node:tls";
import type { DialOptions } from "./options.ts";

/** The subset of `tls.connect` options a dial uses; spread into ws, https-proxy-agent or tls.connect. */
export type ClientTlsOptions = Pick<
  ConnectionOptions,
  "ca" | "servername" | "rejectUnauthorized" | "checkServerIdentity"
>;

/** Resolves the TLS settings of a dial. A custom CA extends the system roots rather than replacing them. */
export async function resolveClientTls(options: DialOptions): Promise<ClientTlsOptions> {
  const tls: ClientTlsOptions = { rejectUnauthorized: options.insecureSkipTlsVerify !== true };
  const extra: Array<string | Buffer> = [];
  if (options.ca !== undefined) extra.push(...(Array.isArray(options.ca) ? options.ca : [options.ca]));
  if (options.caFile !== undefined) {
    try {
      extra.push(await readFile(options.caFile));
    } catch (err) {
      throw new Error(`cannot read CA file ${options.caFile}: ${(err as Error).message}`, { cause: err });
    }
  }
  for (const pem of extra) {
    if (!String(pem).includes("-----BEGIN CERTIFICATE-----")) {
      throw new TypeError("ca must be PEM text containing at least one -----BEGIN CERTIFICATE----- block");
    }
  }
  if (extra.length > 0) tls.ca = [...rootCertificates, ...extra];

  const name = options.serverName;
  if (name !== undefined) {
    if (name === "") throw new TypeError("serverName must not be empty");
    // SNI cannot carry an IP address; the certificate is still checked against it.
    if (isIP(name) === 0) tls.servername = name;
    tls.checkServerIdentity = (_host, cert) => checkServerIdentity(name, cert);
  }
  return tls;
}
