// The GitOps module's section of kas's configuration: agent.gitops (GitLab's names and defaults).
import { z } from "zod";
import { countSetting, durationAtLeast, durationSetting } from "../../../tool/config/kinds.ts";

export const gitopsKasSection = z.object({
  pollPeriodMs: durationAtLeast(
    "1s",
    "each poll is a call to Gitaly for every watched manifest project and ref",
    {
      default: "20s",
      doc: "How often kas looks for a new commit of each manifest project and ref agents follow (one ref lookup, shared by every agent following it; files are read only when the commit moved). A push notification triggers a look at once.",
    },
  ),
  projectInfoCacheTtlMs: durationSetting({
    default: "300s",
    doc: "How long GitLab's answer to whether an agent may read a manifest project (project_info) is reused.",
  }),
  projectInfoCacheErrorTtlMs: durationSetting({
    default: "60s",
    doc: "How long GitLab's refusal (401/403/404) of an agent's access to a manifest project is reused.",
  }),
  maxManifestFileSize: countSetting({
    default: 5 * 1024 * 1024,
    doc: "Largest manifest file sent to an agent, in bytes; a commit with a larger matching file is refused (RESOURCE_EXHAUSTED) and the agent keeps what it has.",
  }),
  maxTotalManifestFileSize: countSetting({
    default: 20 * 1024 * 1024,
    doc: "Largest total size of the matching manifest files of one manifest project at one commit, in bytes; over it the commit is refused.",
  }),
  maxNumberOfPaths: countSetting({
    default: 100,
    doc: "Most path globs an agent may give for one manifest project.",
  }),
  maxNumberOfFiles: countSetting({
    default: 1000,
    doc: "Most files the globs of one manifest project may match at one commit; over it the commit is refused.",
  }),
});

export type GitopsKasConfig = z.output<typeof gitopsKasSection>;
