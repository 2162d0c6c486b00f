import { once } from "node:events";
import { type AddressInfo, createServer } from "node:net";

/**
 * A loopback port nothing listens on (one the OS just handed out, then closed again): where a
 * client should meet "connection refused". Servers of the tests themselves listen on port 0 and
 * report where they ended up instead.
 */
export async function closedPort(): Promise<number> {
  const probe = createServer().listen(0, "127.0.0.1");
  await once(probe, "listening");
  const { port } = probe.address() as AddressInfo;
  probe.close();
  await once(probe, "close");
  return port;
}
