// The whole config.yaml (agentcfg ConfigurationFile), in both flavours (see flavour.ts).
import type { z } from "zod";
import { ciAccessSchema, userAccessSchema } from "./access.ts";
import { clusterViewsSchema } from "./cluster-views.ts";
import { containerScanningSchema } from "./container-scanning.ts";
import { FILE, type Flavour, WIRE } from "./flavour.ts";
import { fluxSchema } from "./flux.ts";
import { gitopsSchema } from "./gitops.ts";
import { observabilitySchema } from "./observability.ts";
import { remoteDevelopmentSchema } from "./remote-development.ts";

// An absent section is a feature left off, except observability, whose defaults always apply.
const rootSchema = (f: Flavour) =>
  f.object({
    gitops: gitopsSchema(f).optional(),
    observability: observabilitySchema(f).prefault({}),
    ci_access: ciAccessSchema(f).optional(),
    user_access: userAccessSchema(f).optional(),
    container_scanning: containerScanningSchema(f).optional(),
    remote_development: remoteDevelopmentSchema(f).optional(),
    flux: fluxSchema(f).optional(),
    cluster_views: clusterViewsSchema(f).optional(),
  });

/** config.yaml as kas reads it: unknown keys refused, durations as text ("3600s"). */
export const agentConfigurationSchema = rootSchema(FILE);

/**
 * The same configuration as agentk receives it from kas (JSON, durations in milliseconds).
 * Lenient: keys this agent does not know are dropped, not refused, so an older agent keeps
 * working with a newer kas. Everything it does know is validated as strictly as in the file.
 */
export const agentSideSchema = rootSchema(WIRE);

/** A validated configuration with GitLab's defaults applied; durations in milliseconds. */
export type AgentConfiguration = z.output<typeof agentConfigurationSchema>;
