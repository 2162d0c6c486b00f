// Git repositories that stand for many agents' projects, on kas's disk (static tokens file agents
// read them without Gitaly): configuration projects and GitOps manifest projects.
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { benchGit, benchGitEnv } from "./git.ts";

/**
 * `n` bare repositories under `dir`; agent i (named bench-<i+1>, as bench/scale names them) has its
 * configuration file in repository i % n.
 */
export function makeConfigRepos(dir: string, n: number, agents: number): string[] {
  return makeRepos(dir, "config", n, (r) => {
    const files: Record<string, string> = {};
    for (let i = r; i < agents; i += n) {
      files[`.gitlab/agents/bench-${i + 1}/config.yaml`] =
        `observability:\n  logging:\n    level: info\nci_access:\n  groups:\n    - id: bench/agent-${i + 1}\n`;
    }
    return files;
  });
}

/** `n` bare manifest repositories under `dir`, each with `files` small manifests under manifests/. */
export function makeManifestRepos(dir: string, n: number, files = 3): string[] {
  return makeRepos(dir, "manifests", n, (r) =>
    Object.fromEntries(
      Array.from({ length: files }, (_, f) => [
        `manifests/cm-${f}.yaml`,
        `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bench-${r}-${f}\n  namespace: bench\ndata:\n  key: value-${f}\n`,
      ]),
    ),
  );
}

/** `n` bare repositories `<prefix>-<r>.git`, each one commit on main holding `files(r)`. */
function makeRepos(
  dir: string,
  prefix: string,
  n: number,
  files: (r: number) => Record<string, string>,
): string[] {
  const env = benchGitEnv(dir);
  const git = benchGit(dir);
  const repos = join(dir, `${prefix}-repos`);
  const scratch = join(dir, `${prefix}-files`);
  mkdirSync(repos, { recursive: true });
  mkdirSync(scratch, { recursive: true });
  const paths: string[] = [];
  for (let r = 0; r < n; r++) {
    const repo = join(repos, `${prefix}-${r}.git`);
    execFileSync("git", ["init", "-q", "--bare", "-b", "main", repo], { env });
    const entries = Object.entries(files(r));
    // Every file hashed by one git process per repository.
    const onDisk = entries.map(([, content], k) => {
      const file = join(scratch, `${r}-${k}`);
      writeFileSync(file, content);
      return file;
    });
    const blobs = git(repo, ["hash-object", "-w", "--stdin-paths"], `${onDisk.join("\n")}\n`).split("\n");
    const lines = entries.map(([name], k) => `100644 ${blobs[k]}\t${name}\0`);
    const index = { GIT_INDEX_FILE: join(dir, `index-${prefix}-${r}`) };
    git(repo, ["update-index", "-z", "--index-info"], lines.join(""), index);
    const tree = git(repo, ["write-tree"], "", index);
    git(repo, ["update-ref", "refs/heads/main", git(repo, ["commit-tree", "-m", "agents", tree])]);
    paths.push(repo);
  }
  return paths;
}
