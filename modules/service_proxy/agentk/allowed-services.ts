import { readFile } from "node:fs/promises";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { flag } from "../../../tool/config/flags.ts";
import { parseString, parseUrl, ValueError } from "../../../tool/config/values.ts";
import { KUBERNETES_SERVICE } from "../../runtime/index.ts";

/** An in-cluster HTTP service kas may reach through the tunnel, by name; nothing else is reachable. */
export interface AllowedService {
  name: string;
  /** http(s) base URL, e.g. "http://prometheus.monitoring.svc:9090/". */
  url: string;
}

const NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** One `--service name=http://url` value. Throws ValueError. */
export function parseServiceSpec(spec: string): AllowedService {
  const eq = spec.indexOf("=");
  if (eq === -1) throw new ValueError(`expected name=http://host:port, got ${JSON.stringify(spec)}`);
  return checkedService(spec.slice(0, eq).trim(), spec.slice(eq + 1).trim());
}

function checkedService(name: string, url: unknown): AllowedService {
  if (!NAME.test(name) || name.length > 63) {
    throw new ValueError(
      `service name ${JSON.stringify(name)} must be a DNS label (a-z, 0-9, "-", at most 63)`,
    );
  }
  if (name === KUBERNETES_SERVICE) {
    throw new ValueError(
      `service name ${JSON.stringify(name)} is reserved for the Kubernetes API, which kas reaches through its Kubernetes API proxy only`,
    );
  }
  try {
    return { name, url: parseUrl(url, ["http", "https"]) };
  } catch (err) {
    throw new ValueError(`service ${name}: ${(err as Error).message}`);
  }
}

/** A YAML/JSON file: `services: {name: url, ...}` (or the mapping at the top level). Throws ValueError. */
export async function readServicesFile(path: string): Promise<AllowedService[]> {
  let doc: unknown;
  try {
    doc = parseYaml(await readFile(path, "utf8"));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ValueError(
      code ? `cannot read ${path}: ${code}` : `${path} is not valid YAML: ${(err as Error).message}`,
    );
  }
  const mapping = isMapping(doc) && "services" in doc ? doc.services : doc;
  if (!isMapping(mapping)) throw new ValueError(`${path}: expected "services:" mapping each name to a URL`);
  return Object.entries(mapping).map(([name, url]) => checkedService(name, url));
}

function isMapping(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The module's agentk flags: the services given one by one, and a file of them (both add up). */
export const serviceProxyAgentkFlags = z.object({
  service: flag((raw) => (raw as string[]).map((spec) => spec.trim()), {
    kind: "name=url",
    env: "AGENTK_SERVICES",
    listSeparator: ",",
    doc: "in-cluster HTTP service kas may reach, name=http://host:port; repeatable (env: comma-separated)",
  }),
  servicesFile: flag(parseString, {
    kind: "file path",
    env: "AGENTK_SERVICES_FILE",
    doc: 'YAML file "services: {name: url}" (adds to --service)',
  }),
});
