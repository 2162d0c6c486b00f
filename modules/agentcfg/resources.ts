// Kubernetes resource requests/limits as they appear in several sections.
import { z } from "zod";
import type { Flavour } from "./flavour.ts";

// A Kubernetes quantity ("500m", "1Gi"); YAML users often write a bare number (`cpu: 1`).
const quantity = z.union([z.string().min(1), z.number().nonnegative()]).transform(String);

export const resourceSchema = (f: Flavour) =>
  f.object({ cpu: quantity.optional(), memory: quantity.optional() });

export const resourceRequirementsSchema = (f: Flavour) =>
  f.object({ limits: resourceSchema(f).optional(), requests: resourceSchema(f).optional() });
