#!/usr/bin/env bash
# Installs Browser Bridge for this user and starts it:
#   builds bin/browserbridge, bin/browserbridge-host and bin/browserbridge-proxy,
#   then `browserbridge install --prefix` copies them and the extension's runtime
#   files to $PREFIX (default ~/.local/share/browserbridge), links
#   `browserbridge` into $BINDIR (default ~/.local/bin), registers the native
#   host with every browser found (or as the arguments say:
#   ./scripts/install.sh --browser chromium), installs the per-user service
#   where there is a service manager, and records all of it for
#   `browserbridge uninstall`; `browserbridge restart` then (re)starts the
#   bridge, with or without a service manager.
# Safe to run again: it replaces the binaries and the extension and restarts
# the bridge.
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

reload=""
[ -f "$PREFIX/extension/manifest.json" ] && reload=1

say "==> installing into $PREFIX"
if ! "$repo/bin/browserbridge" install --prefix "$PREFIX" --bindir "$BINDIR" --extension "$repo/extension" "$@"; then
  [ -x "$PREFIX/bin/browserbridge" ] || die "installing failed; see above"
  say "warning: the native host is not registered with any browser yet; fix the above and run: browserbridge install --browser <name>"
fi
bb="$PREFIX/bin/browserbridge"

say "==> starting the bridge"
"$bb" restart || die "the bridge did not start (above is why); after fixing it run: $bb start"
"$bb" status

url=$("$bb" status --json | sed -n 's/.*"\(http:[^"]*\/mcp\)".*/\1/p' | head -1)
if [ -n "$reload" ]; then
  step1="Reload the extension, which now has new files: open chrome://extensions
     (or edge://, brave://), find Browser Bridge and click reload ↻
     (it was loaded from $PREFIX/extension)."
else
  step1="Load the extension: open chrome://extensions (or edge://, brave://),
     turn on Developer mode, click \"Load unpacked\" and pick:
       $PREFIX/extension"
fi
# The steps name a command that runs as typed: the bare name only when
# $BINDIR is on PATH, and the PATH hint comes first, not after them.
name=browserbridge
case ":$PATH:" in
  *":$BINDIR:"*) ;;
  *) name="$BINDIR/browserbridge"
     say ""
     say "$BINDIR is not on your PATH: the steps below name browserbridge by its full path."
     say "Add it to run it by name:  export PATH=\"$BINDIR:\$PATH\"  (in ~/.profile to keep it)";;
esac
proxy_note="The cloud proxy, for reaching browsers from other machines (docs/relay.md):
  $PREFIX/bin/browserbridge-proxy init"
[ -x "$PREFIX/bin/browserbridge-proxy" ] || proxy_note="browserbridge-proxy (the cloud proxy) was not installed: see above why."
cat <<NEXT

Browser Bridge is installed and running at ${url:-http://127.0.0.1:3456/mcp}.

Next steps:
  1. $step1
  2. Add it to your MCP clients:
       $name clients add all   (or claude-code, claude-desktop, cursor, vscode)
  3. Check every hop:
       $name doctor
$proxy_note
NEXT
