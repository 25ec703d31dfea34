#!/usr/bin/env bash
# Run issue 19's 10-step task and issue 32's page set
# (BenchmarkTaskAlternatives in bridge/internal/e2e) against Browser Bridge,
# Playwright MCP and chrome-devtools-mcp in interleaved rounds, and print
# the tables. BROWSERBRIDGE_BENCH_PAGESET_DUMP=DIR writes what each agent
# read on each page of the set (last round) to DIR.
#
#   scripts/bench-alternatives.sh [go test flags…]    e.g. -benchtime 10x
#
# The alternatives are installed from the npm registry, at the versions
# pinned below, into a cache outside the repository (never committed):
# $BROWSERBRIDGE_BENCH_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/browserbridge-bench.
# No browser is downloaded: both drive the machine's Chromium
# (/usr/bin/chromium, Debian's, which the e2e suite needs anyway).
# BENCHTIME sets the rounds (default 5x); GO the go command.
set -euo pipefail
cd "$(dirname "$0")/.."

playwright_mcp=0.0.83
devtools_mcp=1.11.0
# chrome-devtools-mcp's engines field: ^20.19.0 || ^22.12.0 || >=23.
min_node=20.19.0

cache=${BROWSERBRIDGE_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/browserbridge-bench}
go=${GO:-go}

if [ ! -x /usr/bin/chromium ]; then
  echo "bench-alternatives: /usr/bin/chromium is missing: the benchmark needs Debian's chromium (apt-get install chromium)" >&2
  exit 1
fi

# node_ok NODE: NODE runs and is at least $min_node.
node_ok() {
  local v
  v=$("$1" --version 2>/dev/null) || return 1
  [ "$(printf '%s\n%s\n' "$min_node" "${v#v}" | sort -V | head -n1)" = "$min_node" ]
}

# installed PACKAGE: the version of PACKAGE in the cache, or nothing.
installed() {
  sed -n 's/^  "version": "\(.*\)",$/\1/p' "$cache/node_modules/$1/package.json" 2>/dev/null | head -n1
}

if [ "$(installed @playwright/mcp)" != "$playwright_mcp" ] || [ "$(installed chrome-devtools-mcp)" != "$devtools_mcp" ]; then
  if ! command -v npm >/dev/null; then
    echo "bench-alternatives: npm not found; install Node.js with npm, then run this again" >&2
    exit 1
  fi
  echo "bench-alternatives: npm install @playwright/mcp@$playwright_mcp chrome-devtools-mcp@$devtools_mcp into $cache" >&2
  mkdir -p "$cache"
  # Neither package downloads a browser on install; the variables make sure.
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 PUPPETEER_SKIP_DOWNLOAD=1 \
    npm install --prefix "$cache" --save-exact --no-audit --no-fund --loglevel=error \
    "@playwright/mcp@$playwright_mcp" "chrome-devtools-mcp@$devtools_mcp" >&2
fi

# The machine's node when recent enough, else the one tools/npm holds
# (scripts/install-test-tools.sh installs it and prints its path).
if command -v node >/dev/null && node_ok "$(command -v node)"; then
  node=$(command -v node)
else
  node=$(./scripts/install-test-tools.sh)
fi

echo "bench-alternatives: Playwright MCP $playwright_mcp, chrome-devtools-mcp $devtools_mcp, node $("$node" --version), $(/usr/bin/chromium --version 2>/dev/null | head -n1)" >&2
BROWSERBRIDGE_BENCH_ALTERNATIVES="$cache" BROWSERBRIDGE_BENCH_NODE="$node" \
  "$go" test -count=1 -run '^$' -bench '^BenchmarkTaskAlternatives$' -benchtime "${BENCHTIME:-5x}" -timeout 30m \
  "$@" ./bridge/internal/e2e/
