import type { ClientTlsOptions } from "./tls-options.ts";

/** A dial's options after defaults, file reads and proxy lookup. */
export interface DialConfig {
  subprotocol: string;
  headers: Readonly<Record<string, string>>;
  maxPayload: number;
  /** Empty for ws:// targets. */
  tls: ClientTlsOptions;
  proxy: URL | undefined;
}
