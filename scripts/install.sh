#!/usr/bin/env bash
# Installs Browser Bridge for this user and starts it:
#   builds bin/browserbridge and bin/browserbridge-host,
#   copies them and the extension to $PREFIX (default ~/.local/share/browserbridge),
#   links `browserbridge` into ~/.local/bin,
#   registers the native host with every browser found (or as the arguments
#   say: ./scripts/install.sh --browser chromium), installs and starts the
#   per-user service, and makes sure a bridge is running.
# Safe to run again: it replaces the binaries and restarts the bridge.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
PREFIX=${PREFIX:-"$HOME/.local/share/browserbridge"}
BINDIR=${BINDIR:-"$HOME/.local/bin"}

say() { printf '%s\n' "$*"; }
die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || [ -x /usr/local/go/bin/go ] || die "Go is needed to build Browser Bridge (https://go.dev/dl/)"
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"

say "==> building"
make -C "$repo" --no-print-directory build

say "==> installing into $PREFIX"
mkdir -p "$PREFIX/bin" "$BINDIR"
for b in browserbridge browserbridge-host; do
  # Copy then rename: a running host keeps its old file, nothing half-written is ever run.
  cp "$repo/bin/$b" "$PREFIX/bin/.$b.new"
  chmod 0755 "$PREFIX/bin/.$b.new"
  mv -f "$PREFIX/bin/.$b.new" "$PREFIX/bin/$b"
done
rm -rf "$PREFIX/extension.new"
mkdir -p "$PREFIX/extension.new"
(cd "$repo/extension" && find . -type f ! -name '*.go' ! -path './test/*' ! -path './node_modules/*' -exec cp --parents {} "$PREFIX/extension.new/" \;)
rm -rf "$PREFIX/extension"
mv "$PREFIX/extension.new" "$PREFIX/extension"
ln -sf "$PREFIX/bin/browserbridge" "$BINDIR/browserbridge"
bb="$PREFIX/bin/browserbridge"

say "==> registering the native host"
if ! "$bb" install "$@"; then
  say "warning: the native host is not registered with any browser yet; fix the above and run: browserbridge install --browser <name>"
fi

say "==> starting the bridge"
if "$bb" service status >/dev/null 2>&1; then
  "$bb" service restart >/dev/null || true # pick up the new binary
elif pid=$("$bb" status --json 2>/dev/null | sed -n 's/^  "pid": \([0-9]*\),$/\1/p') && [ -n "$pid" ]; then
  # A bridge from an earlier run, not under a service manager: replace it.
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do "$bb" status >/dev/null 2>&1 || break; sleep 0.1; done
fi
ok=""
for _ in $(seq 1 50); do
  if "$bb" status >/dev/null 2>&1; then ok=1; break; fi
  sleep 0.1
done
if [ -z "$ok" ]; then
  # No service manager (or it failed): run the bridge detached; the host
  # would also start it on demand when the browser connects.
  mkdir -p "$PREFIX/run"
  (setsid "$bb" serve </dev/null >/dev/null 2>&1 &) || nohup "$bb" serve </dev/null >/dev/null 2>&1 &
  for _ in $(seq 1 50); do
    if "$bb" status >/dev/null 2>&1; then ok=1; break; fi
    sleep 0.1
  done
fi
[ -n "$ok" ] || die "the bridge did not start; run: $bb serve   (it prints why)"
"$bb" status

url=$("$bb" status --json | sed -n 's/.*"\(http:[^"]*\/mcp\)".*/\1/p' | head -1)
cat <<NEXT

Browser Bridge is installed and running.

Next steps:
  1. Load the extension: open chrome://extensions (or edge://, brave://),
     turn on Developer mode, click "Load unpacked" and pick:
       $PREFIX/extension
  2. Add it to Claude Code:
       claude mcp add --transport http browserbridge ${url:-http://127.0.0.1:3456/mcp}
  3. Check every hop:
       browserbridge doctor
NEXT
case ":$PATH:" in *":$BINDIR:"*) ;; *) say "(add $BINDIR to your PATH to run browserbridge by name)";; esac
