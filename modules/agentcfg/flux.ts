// `flux`: how GitLab notifies Flux of pushes (agentcfg FluxCF).
import { z } from "zod";
import type { Flavour } from "./flavour.ts";

export const fluxSchema = (f: Flavour) =>
  f.object({
    // Absent: the agent discovers Flux's webhook receiver itself.
    webhook_receiver_url: z.string().min(1).optional(),
  });
