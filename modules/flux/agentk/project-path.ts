// Which GitLab project a Flux GitRepository points at, as GitLab's agent reads it: the URL's host
// must be GitLab's (its external URL's host), and the project's full path is the URL's path
// without leading slashes and a trailing `.git`. Flux takes HTTP(S) and ssh:// URLs (not the
// SCP-like `git@host:path` form, see https://fluxcd.io/flux/components/source/gitrepositories/#url).

/** The host GitRepository URLs must name, from GitLab's external URL; undefined when there is none. */
export function gitlabHost(externalUrl: string): string | undefined {
  if (externalUrl === "") return undefined;
  try {
    return new URL(externalUrl).hostname.toLowerCase() || undefined;
  } catch {
    return undefined;
  }
}

/** The full project path `url` names on `host`, or undefined (another host, no path, not a URL). */
export function gitlabProjectPath(url: string, host: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  if (parsed.hostname.toLowerCase() !== host) return undefined;
  let path: string;
  try {
    path = decodeURIComponent(parsed.pathname);
  } catch {
    return undefined; // a malformed escape
  }
  path = path.replace(/^\/+/, "");
  if (path.endsWith(".git")) path = path.slice(0, -".git".length);
  return path === "" ? undefined : path;
}
