import { randomBytes } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";

/** GitLab's kas example configuration (v16.5), as GitLab ships it: see test/fixtures/gitlab-kas/README.md. */
export const GITLAB_EXAMPLE = join(import.meta.dirname, "../../fixtures/gitlab-kas/config_example.yaml");

/**
 * GitLab's example with its placeholder secret file (`/some/file`, for every secret) pointed at a
 * 32-byte base64 secret written in `dir`; `edit` changes the text further. Returns the file's path.
 */
export async function writeGitlabExample(
  dir: string,
  edit: (text: string) => string = (t) => t,
): Promise<string> {
  const secret = join(dir, "secret");
  await writeFile(secret, randomBytes(32).toString("base64"));
  const text = (await readFile(GITLAB_EXAMPLE, "utf8")).replaceAll("/some/file", secret);
  const path = join(dir, "gitlab-kas.yaml");
  await writeFile(path, edit(text));
  return path;
}
