#!/usr/bin/env bash
# Runs one container of a pod as a container runtime does under the pod's securityContext, with what
# this machine has (util-linux, coreutils): its own mount, UTS, IPC and PID namespaces inside the pod's
# network namespace; the image's root filesystem (a `buildah mount`) read-only; the volumes bind-mounted
# over it; /proc, a minimal /dev; then the user and groups given, no capabilities, no_new_privs
# (allowPrivilegeEscalation: false), and the container's environment only.
# Usage: run-container.sh NETNS ROOTFS UID:GID GROUPS HOSTNAME WORKDIR [SOURCE:TARGET:ro|rw ...] -- [NAME=VALUE ...] -- COMMAND...
# GROUPS: supplementary groups, comma-separated (the pod's fsGroup). Needs root (CAP_SYS_ADMIN).
set -euo pipefail
if [[ ${1:-} != --inside ]]; then
  netns=$1
  shift
  # --kill-child: the container dies with this script; PID 1 in its namespace is the entrypoint.
  exec ip netns exec "$netns" unshare --mount --uts --ipc --pid --fork --kill-child --propagation private -- "$0" --inside "$@"
fi
shift
rootfs=$1 user=$2 groups=$3 host=$4 workdir=$5
shift 5
mounts=()
while [[ $1 != -- ]]; do mounts+=("$1"); shift; done
shift
env=()
while [[ $1 != -- ]]; do env+=("$1"); shift; done
shift

hostname "$host"
mount --bind "$rootfs" "$rootfs"
# Mount points are made in the container's own layer, as a runtime does.
mkdir -p "$rootfs/proc" "$rootfs/dev"
mount -t proc -o nosuid,nodev,noexec proc "$rootfs/proc"
mount -t tmpfs -o nosuid,noexec,mode=755,size=64k tmpfs "$rootfs/dev"
for d in null zero random urandom; do
  touch "$rootfs/dev/$d"
  mount --bind "/dev/$d" "$rootfs/dev/$d"
done
for m in "${mounts[@]}"; do
  IFS=: read -r source target mode <<<"$m"
  if [[ -d $source ]]; then mkdir -p "$rootfs$target"; else mkdir -p "$(dirname "$rootfs$target")" && touch "$rootfs$target"; fi
  mount --bind "$source" "$rootfs$target"
  [[ $mode == ro ]] && mount -o remount,bind,ro,nosuid,nodev "$rootfs$target"
done
mount -o remount,bind,ro "$rootfs"
# chroot's --userspec sets the uid last: every capability is gone by then (setuid from root to non-root).
exec setpriv --no-new-privs chroot --userspec="$user" --groups="$groups" "$rootfs" \
  /usr/bin/env -i -C "$workdir" "${env[@]}" "$@"
