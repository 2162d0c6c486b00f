import type { Duplex } from "node:stream";
import { openWithHeader, type StreamHeaderInit, StreamRejectedError } from "../tunnel/header/index.ts";
import type { LocalRegistry, Tunnel } from "./local-registry.ts";

export interface LocalOpenOptions {
  signal?: AbortSignal | undefined;
  /** Covers opening the stream and the agent's verdict on its header. */
  timeoutMs: number;
}

/**
 * Opens a stream to the agent over one of this replica's tunnels, least loaded first, with
 * `header` sent and accepted. A tunnel that fails under us (closed mid-open, stream limit) is
 * skipped for the next; a refusal by the agent (StreamRejectedError) is its verdict and is
 * thrown, and so is a header no agent could accept (TypeError). Resolves `undefined` when no tunnel here could take the stream.
 */
export async function openLocal(
  registry: LocalRegistry,
  agentId: string,
  header: StreamHeaderInit,
  options: LocalOpenOptions,
): Promise<Duplex | undefined> {
  const tried = new Set<Tunnel>();
  for (let tunnel = registry.pick(agentId); tunnel; tunnel = registry.pick(agentId, tried)) {
    tried.add(tunnel);
    try {
      const t = tunnel;
      return await openWithHeader(() => t.open(), header, options);
    } catch (err) {
      // A header no peer could take (TypeError) fails the same on every tunnel: say so at once.
      if (err instanceof StreamRejectedError || err instanceof TypeError || options.signal?.aborted)
        throw err;
    }
  }
  return undefined;
}
