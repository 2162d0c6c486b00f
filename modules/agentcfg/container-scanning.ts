// `container_scanning`: operational container scanning on a cron cadence (agentcfg ContainerScanningCF).
import { z } from "zod";
import type { Flavour } from "./flavour.ts";
import { resourceRequirementsSchema } from "./resources.ts";

// Plain repeated strings in GitLab's proto: an empty one is not refused there either.
const names = z.array(z.string()).default([]);

export const containerScanningSchema = (f: Flavour) =>
  f.object({
    // A cron expression, e.g. '0 0 * * *'. GitLab requires it.
    cadence: z.string().min(1),
    vulnerability_report: f
      .object({
        namespaces: names,
        filters: z
          .array(f.object({ namespaces: names, resources: names, containers: names, kinds: names }))
          .default([]),
      })
      .optional(),
    resource_requirements: resourceRequirementsSchema(f).optional(),
    scanner_timeout: f.duration().optional(),
    report_max_size: f.integer(z.int().positive()).optional(),
  });
