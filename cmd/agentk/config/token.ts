import { readFile } from "node:fs/promises";
import { AgentToken } from "../../../tool/agent-token.ts";

/** The agent token from --token-file (or AGENTK_TOKEN_FILE) or AGENTK_TOKEN: exactly one of them. Errors never show it. */
export async function readToken(
  [file, field]: [string | undefined, string],
  env: NodeJS.ProcessEnv,
  fail: (field: string, message: string) => void,
): Promise<AgentToken | undefined> {
  const fromEnv = env.AGENTK_TOKEN;
  if (file !== undefined && fromEnv) {
    fail(field, "and AGENTK_TOKEN are both set; use one");
    return undefined;
  }
  let token: string;
  if (file !== undefined) {
    try {
      token = (await readFile(file, "utf8")).trim();
    } catch (err) {
      fail(field, `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      return undefined;
    }
  } else if (fromEnv) {
    token = fromEnv.trim();
  } else {
    fail("--token-file", "required (or the token in AGENTK_TOKEN)");
    return undefined;
  }
  const where = file !== undefined ? file : "AGENTK_TOKEN";
  if (token === "") fail(field, `${where} is empty`);
  else if (!/^[\x21-\x7e]+$/.test(token))
    fail(field, `${where}: the token contains spaces or non-ASCII characters`);
  else return new AgentToken(token);
  return undefined;
}
