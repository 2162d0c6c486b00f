// The ref advertisement `git upload-pack --advertise-refs` writes (protocol v0, what Gitaly's
// InfoRefsUploadPack returns): enough to resolve branches, tags and HEAD without any object.
import { encodePktLine, FLUSH, PktLineError, splitPktLines } from "./pkt-line.ts";

export interface RefAdvertisement {
  /** Ref name (including "HEAD") -> object id it points at. */
  readonly refs: ReadonlyMap<string, string>;
  /** Annotated tag ref name -> the object id its `^{}` line says it peels to. */
  readonly peeled: ReadonlyMap<string, string>;
  /** Capabilities from the first line, e.g. "symref=HEAD:refs/heads/main". */
  readonly capabilities: readonly string[];
}

const OID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
const ZERO_OID = /^0+$/;
const SERVICE_PREAMBLE = "# service=";

/** Parses an advertisement, with or without the smart-HTTP "# service=..." preamble. */
export function parseRefAdvertisement(data: Buffer): RefAdvertisement {
  const lines = splitPktLines(data);
  let i = 0;
  const first = lines[0];
  if (first !== undefined && first !== FLUSH && first.toString("latin1").startsWith(SERVICE_PREAMBLE)) {
    if (lines[1] !== FLUSH) throw new PktLineError("no flush packet after the service preamble");
    i = 2;
  }
  const refs = new Map<string, string>();
  const peeled = new Map<string, string>();
  let capabilities: string[] = [];
  let ended = false;
  for (let n = 0; i < lines.length; i++, n++) {
    const line = lines[i]!;
    if (line === FLUSH) {
      ended = true;
      if (i !== lines.length - 1) throw new PktLineError("data after the advertisement's flush packet");
      break;
    }
    let text = line.toString("utf8");
    if (text.endsWith("\n")) text = text.slice(0, -1);
    if (n === 0) {
      const nul = text.indexOf("\0");
      if (nul < 0) throw new PktLineError("the first ref line carries no capabilities");
      capabilities = text
        .slice(nul + 1)
        .split(" ")
        .filter((c) => c !== "");
      text = text.slice(0, nul);
    } else if (text.includes("\0")) {
      throw new PktLineError(`NUL in ref line ${n + 1}`);
    }
    const space = text.indexOf(" ");
    const oid = text.slice(0, space);
    const name = text.slice(space + 1);
    if (space < 0 || !OID.test(oid) || name === "" || /[\s\0]/.test(name)) {
      throw new PktLineError(`malformed ref line ${n + 1}`);
    }
    // An empty repository advertises only its capabilities, on a zero id named "capabilities^{}".
    if (n === 0 && name === "capabilities^{}" && ZERO_OID.test(oid)) continue;
    if (name.endsWith("^{}")) {
      const tag = name.slice(0, -3);
      if (!refs.has(tag))
        throw new PktLineError(`peeled line for ${JSON.stringify(tag)} before the ref itself`);
      peeled.set(tag, oid);
    } else {
      refs.set(name, oid);
    }
  }
  if (!ended && lines.length > 0) throw new PktLineError("advertisement does not end with a flush packet");
  return { refs, peeled, capabilities };
}

/** The branch HEAD points at ("refs/heads/main"), from the `symref=HEAD:...` capability. */
export function headTarget(adv: RefAdvertisement): string | undefined {
  for (const cap of adv.capabilities) {
    if (cap.startsWith("symref=HEAD:")) return cap.slice("symref=HEAD:".length);
  }
  return undefined;
}

/** The advertisement as git writes it (HEAD, if any, first): for tests and the test server. */
export function encodeRefAdvertisement(adv: RefAdvertisement, service?: string): Buffer {
  const parts: Buffer[] = [];
  if (service !== undefined)
    parts.push(encodePktLine(`${SERVICE_PREAMBLE}${service}\n`), encodePktLine(FLUSH));
  const caps = adv.capabilities.join(" ");
  let first = true;
  const line = (oid: string, name: string) => {
    parts.push(encodePktLine(first ? `${oid} ${name}\0${caps}\n` : `${oid} ${name}\n`));
    first = false;
  };
  for (const [name, oid] of adv.refs) {
    line(oid, name);
    const peeledOid = adv.peeled.get(name);
    if (peeledOid !== undefined) line(peeledOid, `${name}^{}`);
  }
  if (first) line("0".repeat(40), "capabilities^{}");
  parts.push(encodePktLine(FLUSH));
  return Buffer.concat(parts);
}
