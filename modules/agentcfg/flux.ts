// `flux`: how GitLab notifies Flux of pushes (agentcfg FluxCF).
import { z } from "zod";
import type { Flavour } from "./flavour.ts";

export const fluxSchema = (f: Flavour) =>
  f.object({
    // Absent: the agent discovers Flux's webhook receiver itself.
    // Empty, like absent (a proto3 string): GitLab's agent uses its default then.
    webhook_receiver_url: z
      .string()
      .transform((v) => (v === "" ? undefined : v))
      .optional(),
  });
