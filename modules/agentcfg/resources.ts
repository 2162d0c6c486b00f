// Kubernetes resource requests/limits as they appear in several sections.
import { z } from "zod";
import type { Flavour } from "./flavour.ts";

// A Kubernetes quantity ("500m", "1Gi"). A string field in GitLab's proto: protojson refuses a
// bare number (`cpu: 1`), so it is refused here too (write `cpu: "1"`); empty is unset.
const quantity = z.string().transform((v) => (v === "" ? undefined : v));

export const resourceSchema = (f: Flavour) =>
  f.object({ cpu: quantity.optional(), memory: quantity.optional() });

export const resourceRequirementsSchema = (f: Flavour) =>
  f.object({ limits: resourceSchema(f).optional(), requests: resourceSchema(f).optional() });
