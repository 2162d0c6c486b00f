// Watches the pipelines an ioredis client sends, for tests that count round trips.
import type { Redis } from "ioredis";

export interface SentPipeline {
  /** performance.now() when it was sent. */
  at: number;
  /** Commands it carried (a script run is one). */
  commands: number;
}

/** Records each pipeline `client` sends from now on; `stop()` puts the client back as it was. */
export function recordPipelines(client: Redis): { sent: SentPipeline[]; stop(): void } {
  const sent: SentPipeline[] = [];
  const pipeline = client.pipeline.bind(client);
  client.pipeline = ((...args: Parameters<typeof pipeline>) => {
    const p = pipeline(...args);
    const exec = p.exec.bind(p);
    p.exec = ((...a: Parameters<typeof exec>) => {
      sent.push({ at: performance.now(), commands: p.length });
      return exec(...a);
    }) as typeof p.exec;
    return p;
  }) as typeof client.pipeline;
  return {
    sent,
    stop: () => {
      client.pipeline = pipeline;
    },
  };
}
