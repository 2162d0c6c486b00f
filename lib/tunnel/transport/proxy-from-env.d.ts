// proxy-from-env 2 ships no types.
declare module "proxy-from-env" {
  /** The proxy URL for `url` per *_PROXY / NO_PROXY, or "" when none applies. */
  export function getProxyForUrl(url: string | URL): string;
}
