#!/usr/bin/env bash
# Runs scripts/install.sh as a throwaway user (temporary HOME, a Chromium
# profile directory so a browser is found, no service manager) and checks
# what a user would:
#  1. install.sh twice with PREFIX and BINDIR set: binaries, the host
#     manifest, a running bridge, the next steps (reload on the second run),
#     the bridge replaced; stop, start and restart without a service manager;
#     uninstall removes the manifest.
#  2. install.sh twice into the default places, then uninstall: HOME is as it
#     was before, path by path (mode, link target, content), but for the logs
#     uninstall keeps; the runtime folder is gone.
#  3. the same with uninstall --purge: HOME is as it was before the config
#     was written.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/bb-install.XXXXXX)
unset XDG_CONFIG_HOME XDG_STATE_HOME XDG_RUNTIME_DIR CHROME_CONFIG_HOME BROWSERBRIDGE_SOCKET BROWSERBRIDGE_HOME PREFIX BINDIR
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
# install.sh builds with Go: keep its caches where they are, not in the
# throwaway HOME (they would be filled anew, and be left behind).
export GOPATH GOMODCACHE GOCACHE
GOPATH=$(go env GOPATH) GOMODCACHE=$(go env GOMODCACHE) GOCACHE=$(go env GOCACHE)
fail() { echo "test-install: FAIL: $*" >&2; exit 1; }
# alive: the process exists and is not a zombie (this machine's init may
# not reap the bridges that start and stop detach).
alive() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null) && [ -n "$s" ] && [ "${s#Z}" = "$s" ]; }
pid_of() { "$1" status --json 2>/dev/null | sed -n 's/^  "pid": \([0-9]*\),$/\1/p'; }
# Each part runs in a subshell that ends the processes it started.
started=()
stop_started() { for p in "${started[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap 'rm -rf "$tmp"' EXIT

# ---- 1: PREFIX and BINDIR, the bridge's life without a service manager ----
(
trap stop_started EXIT
export HOME="$tmp/one/home" PREFIX="$tmp/one/prefix" BINDIR="$tmp/one/bin"
export BROWSERBRIDGE_SOCKET="$tmp/one/run/bridge.sock" BROWSERBRIDGE_HOME="$tmp/one/bb"
mkdir -p "$HOME/.config/chromium/Default" "$BROWSERBRIDGE_HOME/config"
echo '{"listen":"127.0.0.1:0"}' > "$BROWSERBRIDGE_HOME/config/config.json"
bb="$PREFIX/bin/browserbridge"

out=$("$repo/scripts/install.sh" --browser chromium 2>&1) || fail "install.sh exited $?: $out"
for f in browserbridge browserbridge-host browserbridge-proxy; do [ -x "$PREFIX/bin/$f" ] || fail "$PREFIX/bin/$f missing"; done
# A fresh install starts the bridge without first saying it is not running;
# with BINDIR off PATH the steps name the program by its full path, after
# the PATH hint (issue 31, item 9).
grep -q "The bridge is not running" <<<"$out" && fail "a fresh install says the bridge is not running: $out"
grep -qF "$BINDIR/browserbridge clients add all" <<<"$out" || fail "the steps name a bare browserbridge that is not on PATH: $out"
[ "$(grep -n "is not on your PATH" <<<"$out" | cut -d: -f1)" -lt "$(grep -n "Next steps" <<<"$out" | cut -d: -f1)" ] || fail "the PATH hint comes after the steps: $out"
grep -qF "$PREFIX/bin/browserbridge-proxy init" <<<"$out" || fail "the steps do not say where browserbridge-proxy is: $out"
[ -f "$PREFIX/extension/manifest.json" ] || fail "extension not copied"
[ ! -e "$PREFIX/extension/test" ] || fail "the extension's tests were installed"
[ -L "$BINDIR/browserbridge" ] || fail "no link in $BINDIR"
manifest="$HOME/.config/chromium/NativeMessagingHosts/com.browserbridge.host.json"
grep -q "\"path\": \"$PREFIX/bin/browserbridge-host\"" "$manifest" || fail "manifest does not name the installed host: $(cat "$manifest")"
grep -q "Load unpacked" <<<"$out" || fail "no next steps printed: $out"
grep -q "Reload the extension" <<<"$out" && fail "first install asks to reload the extension: $out"
grep -q "browserbridge clients add all" <<<"$out" || fail "no MCP clients step: $out"
url=$("$bb" status --json | sed -n 's/.*"\(http:[^"]*\/mcp\)".*/\1/p' | head -1)
case "$url" in http://127.0.0.1:[1-9]*/mcp) ;; *) fail "status gives no MCP URL: $url";; esac
[ "$url" != http://127.0.0.1:3456/mcp ] || fail "the bridge ignored the config's listen address"
grep -qF "installed and running at $url." <<<"$out" || fail "next steps do not name the bridge's URL $url: $out"
pid1=$(pid_of "$bb")
[ -n "$pid1" ] || fail "bridge not running after install"
started+=("$pid1")

out=$("$repo/scripts/install.sh" --browser chromium 2>&1) || fail "second install.sh exited $?: $out"
grep -q "Reload the extension" <<<"$out" || fail "second install does not ask to reload the extension: $out"
grep -q "Load unpacked" <<<"$out" && fail "second install asks to load the extension again: $out"
pid2=$(pid_of "$bb")
started+=("$pid2")
[ -n "$pid2" ] && [ "$pid2" != "$pid1" ] || fail "second run did not replace the bridge ($pid1 -> $pid2)"
alive "$pid1" && fail "old bridge $pid1 still running"
[ "$(pgrep -fc "$PREFIX/bin/browserbridge serve" || true)" = 1 ] || fail "not exactly one bridge running"

out=$("$bb" stop 2>&1) || fail "stop exited $?: $out"
grep -q "stopped the bridge (pid $pid2)" <<<"$out" || fail "stop: $out"
alive "$pid2" && fail "bridge $pid2 still running after stop"
"$bb" status >/dev/null 2>&1 && fail "status answers after stop"
out=$("$bb" status 2>&1) && fail "status exits 0 with no bridge"
grep -q "Run \`browserbridge start\` to start it again" <<<"$out" || grep -q "Run \`$bb start\` to start it again" <<<"$out" || fail "status hint: $out"
grep -q "on purpose" <<<"$out" || fail "status does not say the bridge was stopped on purpose: $out"
grep -q "service start" <<<"$out" && fail "status points to the service without a service manager: $out"
out=$("$bb" stop 2>&1) || fail "stop with no bridge exited $?: $out"
grep -q "not running" <<<"$out" || fail "stop with no bridge: $out"
out=$("$bb" restart 2>&1) || fail "restart with no bridge exited $?: $out"
pid3=$(pid_of "$bb")
started+=("$pid3")
[ -n "$pid3" ] || fail "restart with no bridge started none: $out"
out=$("$bb" start 2>&1) || fail "start with a bridge exited $?: $out"
grep -q "already running (pid $pid3)" <<<"$out" || fail "start with a bridge: $out"

# A bridge that cannot start says why: the port is taken.
port=${url#http://127.0.0.1:}; port=${port%/mcp}
"$bb" stop >/dev/null
echo "{\"listen\":\"127.0.0.1:$port\"}" > "$BROWSERBRIDGE_HOME/config/config.json"
python3 -c 'import socket,sys,time
s=socket.socket(); s.bind(("127.0.0.1",int(sys.argv[1]))); s.listen(1)
sys.stdout.write("ready\n"); sys.stdout.flush(); time.sleep(600)' "$port" > "$tmp/holder.out" &
holder=$!
started+=("$holder")
for _ in $(seq 1 200); do grep -q ready "$tmp/holder.out" 2>/dev/null && break; sleep 0.05; done
out=$("$bb" start 2>&1) && fail "start succeeded on a taken port: $out"
grep -q "127.0.0.1:$port" <<<"$out" && grep -qi "address already in use\|taken" <<<"$out" || fail "start does not say the port is taken: $out"
kill "$holder"
echo '{"listen":"127.0.0.1:0"}' > "$BROWSERBRIDGE_HOME/config/config.json"

"$bb" start >/dev/null || fail "start after freeing the port failed"
pid4=$(pid_of "$bb"); started+=("$pid4")
out=$("$bb" uninstall 2>&1) || fail "uninstall failed: $out"
[ ! -e "$manifest" ] || fail "manifest left after uninstall"
[ ! -e "$PREFIX" ] && [ ! -e "$BINDIR" ] || fail "uninstall left $PREFIX or $BINDIR: $(find "$PREFIX" "$BINDIR" 2>&1)"
alive "$pid4" && fail "bridge $pid4 still running after uninstall"
grep -q "chrome://extensions → Browser Bridge → Remove" <<<"$out" || fail "uninstall does not say to remove the extension: $out"
grep -q "kept the config in $BROWSERBRIDGE_HOME/config" <<<"$out" || fail "uninstall does not say where the config is kept: $out"
exit 0
) || exit 1

# ---- 2 and 3: the default places, and HOME afterwards ----
# snap lists every path under HOME with its mode, link target and content,
# but for ~/.config/go: the Go toolchain's telemetry counters, which the
# build step of install.sh writes.
snap() {
  (cd "$HOME" && find . -path ./.config/go -prune -o -printf '%p %M %l\n' | LC_ALL=C sort &&
    find . -path ./.config/go -prune -o -type f -exec sha256sum {} + | LC_ALL=C sort -k2)
}
for purge in "" --purge; do
  (
  trap stop_started EXIT
  export HOME="$tmp/two$purge/home" XDG_RUNTIME_DIR="$tmp/two$purge/xdg"
  mkdir -p "$HOME/.config/chromium/Default" "$XDG_RUNTIME_DIR"
  chmod 700 "$XDG_RUNTIME_DIR"
  echo '{}' > "$HOME/.config/chromium/Default/Preferences"
  ln -s .config/chromium "$HOME/chromium-link"
  chmod 640 "$HOME/.config/chromium/Default/Preferences"
  snap > "$tmp/before-config"
  mkdir -p "$HOME/.config/browserbridge"
  echo '{"listen":"127.0.0.1:0"}' > "$HOME/.config/browserbridge/config.json"
  snap > "$tmp/before"
  bb="$HOME/.local/share/browserbridge/bin/browserbridge"

  out=$("$repo/scripts/install.sh" --browser chromium 2>&1) || fail "install.sh (default places) exited $?: $out"
  out=$("$repo/scripts/install.sh" --browser chromium 2>&1) || fail "install.sh again (default places) exited $?: $out"
  pid=$(pid_of "$bb"); started+=("$pid")
  [ -S "$XDG_RUNTIME_DIR/browserbridge/bridge.sock" ] || fail "no socket in the runtime folder"
  out=$("$bb" uninstall $purge 2>&1) || fail "uninstall $purge failed: $out"
  alive "$pid" && fail "bridge $pid still running after uninstall $purge"
  [ -z "$(ls -A "$XDG_RUNTIME_DIR")" ] || fail "uninstall $purge left the runtime folder: $(find "$XDG_RUNTIME_DIR")"
  snap > "$tmp/after"
  if [ -n "$purge" ]; then
    diff "$tmp/before-config" "$tmp/after" >&2 || fail "HOME after install and uninstall --purge differs from before (above)"
    grep -q "kept" <<<"$out" && fail "uninstall --purge kept something: $out"
  else
    # Only the logs may be left: ~/.local/state/browserbridge/*.log and
    # the folders holding them.
    grep -v -e '^\./\.local \|^\./\.local/state \|^\./\.local/state/browserbridge ' \
      -e '^\./\.local/state/browserbridge/[^/ ]*\.log ' -e ' \./\.local/state/browserbridge/[^/ ]*\.log$' \
      "$tmp/after" > "$tmp/after-but-logs"
    diff "$tmp/before" "$tmp/after-but-logs" >&2 || fail "HOME after install and uninstall differs from before, beyond the logs (above)"
    [ -f "$HOME/.local/state/browserbridge/bridge.log" ] || fail "uninstall removed the log without --purge"
    grep -q "kept the logs in $HOME/.local/state/browserbridge" <<<"$out" || fail "uninstall does not say where the logs are kept: $out"
  fi
  exit 0
  ) || exit 1
done
echo "test-install: install.sh twice, stop/start/restart, uninstall and uninstall --purge leave HOME as it was: 3 passed, 0 failed"
