#!/usr/bin/env bash
# Runs scripts/install.sh twice as a throwaway user (temporary HOME, a
# Chromium profile directory so a browser is found, no service manager
# needed) and checks what a user would: binaries, the host manifest, a
# running bridge, the next steps; then that the second run replaced the
# bridge and that uninstall removes the manifest.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/bb-install.XXXXXX)
export HOME="$tmp/home" PREFIX="$tmp/prefix" BINDIR="$tmp/bin"
export BROWSERBRIDGE_SOCKET="$tmp/run/bridge.sock" BROWSERBRIDGE_HOME="$tmp/bb"
unset XDG_CONFIG_HOME XDG_RUNTIME_DIR CHROME_CONFIG_HOME
mkdir -p "$HOME/.config/chromium/Default" "$BROWSERBRIDGE_HOME/config"
echo '{"listen":"127.0.0.1:0"}' > "$BROWSERBRIDGE_HOME/config/config.json"
bb="$PREFIX/bin/browserbridge"
cleanup() {
  pid=$("$bb" status --json 2>/dev/null | sed -n 's/^  "pid": \([0-9]*\),$/\1/p') || true
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "test-install: FAIL: $*" >&2; exit 1; }

out=$("$repo/scripts/install.sh" --browser chromium 2>&1) || fail "install.sh exited $?: $out"
for f in browserbridge browserbridge-host; do [ -x "$PREFIX/bin/$f" ] || fail "$PREFIX/bin/$f missing"; done
[ -f "$PREFIX/extension/manifest.json" ] || fail "extension not copied"
[ -L "$BINDIR/browserbridge" ] || fail "no link in $BINDIR"
manifest="$HOME/.config/chromium/NativeMessagingHosts/com.browserbridge.host.json"
grep -q "\"path\": \"$PREFIX/bin/browserbridge-host\"" "$manifest" || fail "manifest does not name the installed host: $(cat "$manifest")"
grep -q "Load unpacked" <<<"$out" || fail "no next steps printed: $out"
grep -q "claude mcp add --transport http browserbridge http://127.0.0.1:" <<<"$out" || fail "no Claude Code command: $out"
pid1=$("$bb" status --json | sed -n 's/^  "pid": \([0-9]*\),$/\1/p')
[ -n "$pid1" ] || fail "bridge not running after install"

out=$("$repo/scripts/install.sh" --browser chromium 2>&1) || fail "second install.sh exited $?: $out"
pid2=$("$bb" status --json | sed -n 's/^  "pid": \([0-9]*\),$/\1/p')
[ -n "$pid2" ] && [ "$pid2" != "$pid1" ] || fail "second run did not replace the bridge ($pid1 -> $pid2)"
kill -0 "$pid1" 2>/dev/null && fail "old bridge $pid1 still running"
[ "$(pgrep -fc "$PREFIX/bin/browserbridge serve" || true)" = 1 ] || fail "not exactly one bridge running"

"$bb" uninstall >/dev/null || fail "uninstall failed"
[ ! -e "$manifest" ] || fail "manifest left after uninstall"
echo "test-install: install.sh twice and uninstall: 1 passed, 0 failed"
