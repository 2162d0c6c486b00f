// One commit's manifest files for one stream: the files its globs match (hidden ones never), read
// within kas's limits. A limit exceeded is a Refusal, whose message names the limit and the numbers.
import * as grpc from "@grpc/grpc-js";
import { CodedError } from "../../../lib/tunnel/errors.ts";
import {
  type RefSelector,
  type RepositoryCallContext,
  RepositoryError,
  type RepositoryLocation,
  type RepositoryReader,
} from "../../runtime/index.ts";
import { matchingFiles } from "./globs.ts";

/** Ends a stream with `code` and `message` (shown to the agent and on GitLab's API). */
export class Refusal extends CodedError<grpc.status> {
  override name = "Refusal";

  get codeName(): string {
    return grpc.status[this.code] ?? String(this.code);
  }
}

export interface ManifestLimits {
  maxManifestFileSize: number;
  maxTotalManifestFileSize: number;
  maxNumberOfFiles: number;
}

export interface ManifestFile {
  path: string;
  data: Buffer;
}

/**
 * The files of `commit` matching `globs`, read in full before anything is sent (so an agent never
 * gets part of a commit that a limit refuses), all in one `readFiles` call (one rate-limit token,
 * however the repository is laid out): at most `maxNumberOfFiles` files of at most
 * `maxManifestFileSize` bytes each, `maxTotalManifestFileSize` in all, are held. Throws a Refusal for a limit, the repository's error
 * otherwise.
 */
export async function readManifests(
  repositories: RepositoryReader,
  location: RepositoryLocation,
  commit: string,
  globs: readonly string[],
  limits: ManifestLimits,
  ctx: RepositoryCallContext,
): Promise<ManifestFile[]> {
  const files = matchingFiles(await repositories.listFiles(location, commit, "", ctx), globs);
  if (files.length > limits.maxNumberOfFiles) {
    throw new Refusal(
      grpc.status.RESOURCE_EXHAUSTED,
      `commit ${commit}: the path globs match ${files.length} files, more than max_number_of_files (${limits.maxNumberOfFiles})`,
    );
  }
  const out: ManifestFile[] = [];
  if (files.length === 0) return out;
  let contents: Map<string, Buffer>;
  try {
    contents = await repositories.readFiles(
      location,
      commit,
      files.map((f) => f.path),
      limits.maxManifestFileSize,
      ctx,
      // Never more than the total limit held: the backends stop reading past it.
      limits.maxTotalManifestFileSize,
    );
  } catch (err) {
    if (err instanceof RepositoryError && err.code === "too_large" && err.path === undefined) {
      throw new Refusal(
        grpc.status.RESOURCE_EXHAUSTED,
        `commit ${commit}: the matching files are larger than max_total_manifest_file_size (${limits.maxTotalManifestFileSize} bytes) together`,
      );
    }
    if (err instanceof RepositoryError && err.code === "too_large") {
      throw new Refusal(
        grpc.status.RESOURCE_EXHAUSTED,
        `commit ${commit}: ${err.path ?? "a matching file"} is larger than max_manifest_file_size (${limits.maxManifestFileSize} bytes)`,
      );
    }
    throw err;
  }
  let total = 0;
  for (const [i, file] of files.entries()) {
    const data = contents.get(file.path);
    if (data === undefined) continue; // not a blob after all (a submodule), or gone
    total += data.length;
    if (total > limits.maxTotalManifestFileSize) {
      throw new Refusal(
        grpc.status.RESOURCE_EXHAUSTED,
        `commit ${commit}: the matching files are larger than max_total_manifest_file_size (${limits.maxTotalManifestFileSize} bytes): ${total} bytes in the first ${i + 1} of ${files.length} files`,
      );
    }
    out.push({ path: file.path, data });
  }
  return out;
}

/** Why `ref` cannot name a commit (git's ref-name rules; a commit is a full object id), or undefined. */
export function refProblem(ref: RefSelector): string | undefined {
  if ("commit" in ref) {
    return /^(?:[0-9a-fA-F]{40}|[0-9a-fA-F]{64})$/.test(ref.commit)
      ? undefined
      : `commit ${JSON.stringify(ref.commit)} is not a full hex commit id`;
  }
  const [kind, name] = "branch" in ref ? ["branch", ref.branch] : "tag" in ref ? ["tag", ref.tag] : [];
  if (kind === undefined || name === undefined) return undefined;
  const bad = (why: string) => `${kind} name ${JSON.stringify(name)} ${why}`;
  if (name === "") return bad("is empty");
  if (name.length > 1024) return bad("is longer than 1024 characters");
  if (name.startsWith("-")) return bad('starts with "-"');
  if (name === "HEAD" || name === "@") return bad("is not a branch or tag");
  if (name.includes("..") || name.includes("@{")) return bad('contains ".." or "@{"');
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (/[\x00-\x20\x7f~^:?*[\\]/.test(name))
    return bad("contains a space, a control character or one of ~^:?*[\\");
  if (name.startsWith("/") || name.endsWith("/") || name.includes("//"))
    return bad("has an empty path component");
  if (name.endsWith(".")) return bad('ends with "."');
  if (name.split("/").some((p) => p.startsWith(".") || p.endsWith(".lock")))
    return bad('has a component starting with "." or ending with ".lock"');
  return undefined;
}

export function describeRef(ref: RefSelector): string {
  if ("branch" in ref) return `branch ${JSON.stringify(ref.branch)}`;
  if ("tag" in ref) return `tag ${JSON.stringify(ref.tag)}`;
  if ("commit" in ref) return `commit ${ref.commit}`;
  return "the default branch";
}
