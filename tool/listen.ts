import type { Server } from "node:net";
import type { ListenAddress } from "./config/values.ts";

/** Binds `server` to `address`; resolves with the URL it answers at (`scheme`://host:port) and the port. */
export async function listenAt(
  server: Server,
  address: ListenAddress,
  scheme: "http" | "https",
): Promise<{ url: string; port: number }> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(address.port, address.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const bound = server.address() as { address: string; family: string; port: number };
  const host = bound.family === "IPv6" ? `[${bound.address}]` : bound.address;
  return { url: `${scheme}://${host}:${bound.port}`, port: bound.port };
}
