// An environment's slug as Rails makes it when the environment is created (Gitlab::Slug::Environment):
// lowercase letters, digits and `-`, starting with a letter, no `--`, at most 24 characters, no `-`
// at the end; a name it had to change gets a suffix from its SHA-256 so that slugs stay unique.
import { createHash } from "node:crypto";

export function environmentSlug(name: string): string {
  let slug = name.toLowerCase().replace(/[^a-z0-9]/g, "-");
  if (!/^[a-z]/.test(slug)) slug = `env-${slug}`;
  slug = slug.replace(/-+/g, "-"); // squeeze!('-')
  if (slug.length > 24 || slug !== name) {
    // shorten_and_add_suffix: the first 17 characters, `-`, the last 6 base-36 digits of the hash.
    slug = slug.slice(0, 17);
    if (!slug.endsWith("-")) slug += "-";
    return (
      slug +
      BigInt(`0x${createHash("sha256").update(name).digest("hex")}`)
        .toString(36)
        .slice(-6)
    );
  }
  return slug.replace(/-$/, "");
}
