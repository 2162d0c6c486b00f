#!/usr/bin/env bash
# Fails (exit 1, naming the files) when proto/gen is not exactly what `buf generate`
# produces from proto/ today. Generation runs into a temporary directory; the checked-in
# tree is never touched. Offline: the ts-proto plugin comes from node_modules.
set -euo pipefail
cd "$(dirname "$0")/.."

buf=node_modules/.bin/buf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$buf" lint
"$buf" format --diff --exit-code proto
"$buf" generate --output "$tmp"

fresh="$tmp/proto/gen"
if [[ ! -d proto/gen ]]; then
  echo "proto/gen is missing; run \`npm run proto\` and commit the result" >&2
  exit 1
fi
stale=$(diff -rq proto/gen "$fresh" || true)
if [[ -z "$stale" ]]; then
  echo "proto/gen is up to date"
  exit 0
fi

echo "proto/gen is stale; run \`npm run proto\` and commit the result:" >&2
while IFS= read -r line; do
  case "$line" in
    "Files proto/gen/"*" differ") f=${line#Files }; echo "  changed: ${f%% and *}" ;;
    "Only in $fresh"*) rest=${line#Only in "$fresh"}; echo "  missing: proto/gen${rest%%: *}/${rest#*: }" ;;
    "Only in proto/gen"*) rest=${line#Only in }; echo "  not generated (delete): ${rest%%: *}/${rest#*: }" ;;
    *) echo "  $line" ;;
  esac
done <<<"$stale" >&2
exit 1
