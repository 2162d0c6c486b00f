// Gitaly addresses as GitLab writes them (gitlab.yml / agent_info): tcp://host:port,
// tls://host:port, unix:/path or unix:///path. grpc-js wants a target string plus credentials.
import { readFileSync } from "node:fs";
import { rootCertificates } from "node:tls";
import { type ChannelCredentials, credentials } from "@grpc/grpc-js";

export interface GitalyTarget {
  /** What grpc-js dials: "host:port" or "unix:/abs/path". */
  readonly target: string;
  readonly tls: boolean;
}

export class GitalyAddressError extends Error {
  override name = "GitalyAddressError";
}

export function parseGitalyAddress(address: string): GitalyTarget {
  if (address.startsWith("unix:")) {
    // unix:///path and unix:/path both name /path; unix:relative is allowed by grpc-js too.
    const path = address.startsWith("unix://")
      ? address.slice("unix://".length)
      : address.slice("unix:".length);
    if (path === "") throw new GitalyAddressError(`Gitaly address ${address} names no socket`);
    return { target: `unix:${path}`, tls: false };
  }
  const match = /^(tcp|tls):\/\/([^/]+)\/?$/.exec(address);
  if (!match) throw new GitalyAddressError(`unsupported Gitaly address ${address} (tcp://, tls:// or unix:)`);
  const hostPort = match[2]!;
  if (!/:\d+$/.test(hostPort)) throw new GitalyAddressError(`Gitaly address ${address} has no port`);
  return { target: hostPort, tls: match[1] === "tls" };
}

/** Credentials for a target: system roots for tls://, plus `extraCa` (PEM, or a file holding PEM) if given. */
export function gitalyCredentials(target: GitalyTarget, extraCa?: string | Buffer): ChannelCredentials {
  if (!target.tls) return credentials.createInsecure();
  if (extraCa === undefined) return credentials.createSsl();
  const pem = Buffer.isBuffer(extraCa)
    ? extraCa.toString()
    : extraCa.includes("-----BEGIN")
      ? extraCa
      : readFileSync(extraCa, "utf8");
  // grpc-js replaces the default roots when given any: keep the system's and add ours.
  return credentials.createSsl(Buffer.from([...rootCertificates, pem].join("\n")));
}
