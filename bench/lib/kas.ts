// A kas in this process whose agents are those of a static tokens file (no GitLab), for benchmarks.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { KasConfig } from "../../cmd/kas/config/index.ts";
import { type InProcessKas, startInProcessKas } from "../../test/kas/support/in-process.ts";

/** An agent as the static tokens file describes it. */
export interface StaticAgent {
  agentId: number;
  projectId: number;
  agentName: string;
  /** Its configuration project: a local repository. */
  repository: string;
  /** Manifest projects it may read: name -> local repository. */
  manifest_projects?: Record<string, string>;
}

/** Writes `dir`/tokens.yaml (token -> agent) and starts kas on it; `adjust` changes the rest of its configuration. */
export async function startKasWithAgents(
  dir: string,
  agents: Record<string, StaticAgent>,
  adjust: (config: KasConfig) => void,
): Promise<InProcessKas> {
  const tokensFile = join(dir, "tokens.yaml");
  const lines = Object.entries(agents).map(([token, agent]) => `${token}: ${JSON.stringify(agent)}\n`);
  await writeFile(tokensFile, lines.join(""));
  return startInProcessKas((c) => {
    c.agent.staticTokensFile = tokensFile;
    adjust(c);
  });
}
