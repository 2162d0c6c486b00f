#!/usr/bin/env bash
# Makes a Node.js base image from this machine's own node, for image builds where no container
# registry is reachable (only npm's and Debian's are, here): scratch + node, npm, /bin/sh, env,
# their shared libraries and the CA bundle. It stands in for docker.io/library/node:20-bookworm-slim
# (same node binary layout: /usr/local/bin/node, npm on PATH, a `node` user with uid 1000).
# Usage: node-base-image.sh <image name> [buildah global options, e.g. --storage-driver vfs --root DIR]
set -euo pipefail
name=$1
shift
ctr=$(buildah "$@" from scratch)
trap 'buildah "$@" rm "$ctr" >/dev/null' EXIT
root=$(buildah "$@" mount "$ctr")

libs() { ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'; }
put() { # copy host files (symlinks resolved) to the same path in the image
  for f in "$@"; do
    mkdir -p "$root$(dirname "$f")"
    cp -L "$f" "$root$f"
  done
}
node=$(command -v node)
put $(libs "$node") $(libs /bin/sh) $(libs /usr/bin/env) /usr/bin/env /etc/ssl/certs/ca-certificates.crt
mkdir -p "$root/usr/local/bin" "$root/usr/local/lib/node_modules" "$root/bin" "$root/tmp" "$root/home/node"
cp -L "$node" "$root/usr/local/bin/node"
cp -L /bin/sh "$root/bin/sh"
npm_dir=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
cp -a "$npm_dir" "$root/usr/local/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
chmod 1777 "$root/tmp"
chown 1000:1000 "$root/home/node"
printf 'root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000::/home/node:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\nnode:x:1000:\n' >"$root/etc/group"
# This machine's trust (its CA bundle may hold a TLS-intercepting proxy's CA, needed to reach npm).
buildah "$@" config --env PATH=/usr/local/bin:/usr/bin:/bin \
  --env NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt --cmd node "$ctr"
buildah "$@" unmount "$ctr" >/dev/null
buildah "$@" commit --quiet "$ctr" "$name" >/dev/null
