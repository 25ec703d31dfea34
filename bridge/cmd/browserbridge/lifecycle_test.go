//go:build linux

// The lifecycle commands against real processes, on a machine without a
// service manager for the throwaway user. Linux only: the tests read
// /proc to tell a live process from a reaped one.

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/paths"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/extension"
)

// bridgePID is the pid the bridge reports over its socket, 0 if none
// answers.
func (w *world) bridgePID() int {
	w.t.Helper()
	out, code := w.cli("status", "--json")
	if code != 0 {
		return 0
	}
	var st protocol.StatusResult
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		w.t.Fatalf("status --json: %v\n%s", err, out)
	}
	return st.PID
}

// killBridgeAtEnd ends whatever bridge answers when the test ends.
func (w *world) killBridgeAtEnd() {
	w.t.Cleanup(func() {
		if pid := w.bridgePID(); pid > 0 {
			_ = kill(pid)
		}
	})
}

var startedPID = regexp.MustCompile(`started the bridge \(pid (\d+)\)`)

func TestStartStopRestartWithoutServiceManager(t *testing.T) {
	w := newWorld(t)
	w.killBridgeAtEnd()

	// A first restart (what install.sh runs) starts the bridge without
	// first saying it is not running, which reads as a failure.
	out, code := w.cli("restart")
	m := startedPID.FindStringSubmatch(out)
	if code != 0 || m == nil || strings.Contains(out, "not running") {
		t.Fatalf("restart with no bridge: exit %d\n%s", code, out)
	}
	if out, code := w.cli("stop"); code != 0 || !strings.Contains(out, "stopped the bridge (pid "+m[1]+")") {
		t.Fatalf("stop: exit %d\n%s", code, out)
	}
	out, code = w.cli("start")
	m = startedPID.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("start: exit %d\n%s", code, out)
	}
	pid1, _ := strconv.Atoi(m[1])
	if got := w.bridgePID(); got != pid1 {
		t.Fatalf("status says pid %d, start said %d", got, pid1)
	}
	if out, code := w.cli("start"); code != 0 || !strings.Contains(out, fmt.Sprintf("already running (pid %d)", pid1)) {
		t.Fatalf("second start: exit %d\n%s", code, out)
	}

	out, code = w.cli("restart")
	m = startedPID.FindStringSubmatch(out)
	if code != 0 || m == nil || !strings.Contains(out, fmt.Sprintf("stopped the bridge (pid %d)", pid1)) {
		t.Fatalf("restart: exit %d\n%s", code, out)
	}
	pid2, _ := strconv.Atoi(m[1])
	if pid2 == pid1 || alive(pid1) {
		t.Fatalf("restart left pid %d (alive %v), started %d", pid1, alive(pid1), pid2)
	}
	if _, err := os.Stat(paths.StopMarker(w.socket)); !os.IsNotExist(err) {
		t.Fatalf("restart left a stop marker: %v", err)
	}

	out, code = w.cli("stop")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("stopped the bridge (pid %d)", pid2)) {
		t.Fatalf("stop: exit %d\n%s", code, out)
	}
	if alive(pid2) {
		t.Fatalf("bridge %d alive after stop", pid2)
	}
	out, code = w.cli("status")
	if code != 1 || !strings.Contains(out, "Run `browserbridge start` to start it again") || strings.Contains(out, "service start") {
		t.Fatalf("status after stop: exit %d\n%s", code, out)
	}
	if out, code := w.cli("stop"); code != 0 || !strings.Contains(out, "not running") {
		t.Fatalf("stop with no bridge: exit %d\n%s", code, out)
	}
	// stop leaves the marker that keeps the browsers' hosts from starting
	// a bridge; restart did not (it was there neither before nor after
	// it), and start takes it away.
	marker := paths.StopMarker(w.socket)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("no stop marker after stop: %v", err)
	}
	out, code = w.cli("start")
	if code != 0 || startedPID.FindStringSubmatch(out) == nil {
		t.Fatalf("start after stop: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("stop marker still there after start: %v", err)
	}
	// The detached bridge logs to its file, and its stderr file holds
	// nothing but what it said before the log was open (here: nothing).
	logs := filepath.Join(w.home, "bb", "logs")
	if b, err := os.ReadFile(filepath.Join(logs, "bridge.log")); err != nil || !bytes.Contains(b, []byte("stopping the bridge")) {
		t.Errorf("bridge.log: %v\n%s", err, b)
	}
	if b, err := os.ReadFile(filepath.Join(logs, startOutName)); err != nil || len(bytes.TrimSpace(b)) != 0 {
		t.Errorf("%s: %v\n%s", startOutName, err, b)
	}
}

func TestStartSaysWhyTheBridgeDidNotStart(t *testing.T) {
	w := newWorld(t)
	w.killBridgeAtEnd()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	cfg := filepath.Join(w.home, "bb", "config", "config.json")
	os.WriteFile(cfg, []byte(`{"listen":"`+held.Addr().String()+`"}`), 0o600)
	out, code := w.cli("start")
	if code != 1 || !strings.Contains(out, "the bridge did not start") || !strings.Contains(out, held.Addr().String()) ||
		!strings.Contains(out, "address already in use") {
		t.Fatalf("start on a taken port: exit %d\n%s", code, out)
	}
	if pid := w.bridgePID(); pid != 0 {
		t.Fatalf("a bridge (pid %d) answers after a failed start", pid)
	}

	os.WriteFile(cfg, []byte(`{"listen": 3456}`), 0o600)
	out, code = w.cli("start")
	if code != 1 || !strings.Contains(out, `key "listen" must be a string`) {
		t.Fatalf("start with a bad config: exit %d\n%s", code, out)
	}
}

// TestStopKillsABridgeThatWillNotExit stops a process that ignores SIGTERM.
func TestStopKillsABridgeThatWillNotExit(t *testing.T) {
	cmd := exec.Command("sh", "-c", `trap "" TERM; echo ready; while :; do sleep 1; done`)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("child: %q %v", line, err)
	}
	old := termWait
	termWait = 100 * time.Millisecond // the wait ends; what follows is not timed
	defer func() { termWait = old }()
	var stderr bytes.Buffer
	if err := stopPID(context.Background(), "the bridge", cmd.Process.Pid, &stderr, "/x/bridge.log"); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("the bridge (pid %d) did not exit within", cmd.Process.Pid); !strings.Contains(stderr.String(), want) ||
		!strings.Contains(stderr.String(), "killing it; its log: /x/bridge.log") {
		t.Fatalf("stderr = %q", stderr.String())
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child ended with %v, want killed", err)
	}
}

// TestUninstallStopsHostsAndBridge installs into a fresh home with --prefix,
// runs a host from the installed program and a bridge, and checks that
// uninstall --purge stops both and leaves the home as it was.
func TestUninstallStopsHostsAndBridge(t *testing.T) {
	w := newWorld(t)
	w.killBridgeAtEnd()
	w.chromiumProfile()
	before := homeSnapshot(t, w.home)
	prefix := filepath.Join(w.home, ".local", "share", "browserbridge")
	out, code := w.cli("install", "--prefix", prefix, "--bindir", filepath.Join(w.home, ".local", "bin"),
		"--extension", filepath.Join("..", "..", "..", "extension"), "--browser", "chromium")
	if code != 0 {
		t.Fatalf("install: exit %d\n%s", code, out)
	}
	installed := filepath.Join(prefix, "bin", "browserbridge")
	if out, code := w.run(installed, "start"); code != 0 {
		t.Fatalf("start: exit %d\n%s", code, out)
	}
	bridge := w.bridgePID()

	host := exec.Command(filepath.Join(prefix, "bin", "browserbridge-host"), extension.Origin())
	host.Env = append(os.Environ(), w.env...)
	stdin, err := host.StdinPipe() // held open: the browser is "there"
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	defer host.Process.Kill()
	exited := make(chan error, 1)
	go func() { exited <- host.Wait() }()
	testutil.WaitFor(t, "the host to attach", func() bool { return strings.Contains(w.mustStatus(), "hosts attached: 1") })

	out, code = w.run(installed, "uninstall", "--purge")
	if code != 0 {
		t.Fatalf("uninstall: exit %d\n%s", code, out)
	}
	for _, want := range []string{
		fmt.Sprintf("stopped the browser host (pid %d)", host.Process.Pid),
		fmt.Sprintf("stopped the bridge (pid %d)", bridge),
		"chrome://extensions → Browser Bridge → Remove",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("uninstall output lacks %q:\n%s", want, out)
		}
	}
	select {
	case <-exited:
	default:
		t.Errorf("host %d still running after uninstall", host.Process.Pid)
	}
	if alive(bridge) {
		t.Errorf("bridge %d still running after uninstall", bridge)
	}
	if after := homeSnapshot(t, w.home); after != before {
		t.Errorf("home after install and uninstall --purge:\n%s\nbefore:\n%s", after, before)
	}
}

// run runs program with the world's environment.
func (w *world) run(program string, args ...string) (string, int) {
	w.t.Helper()
	cmd := exec.Command(program, args...)
	cmd.Env = append(os.Environ(), w.env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		w.t.Fatal(err)
	}
	return string(out), 0
}

func (w *world) mustStatus() string {
	out, _ := w.cli("status")
	return out
}

// homeSnapshot lists every path under home but the test's own config
// (BROWSERBRIDGE_HOME=home/bb, which --purge empties), with mode, link
// target and content.
func homeSnapshot(t *testing.T, home string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(home, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(home, p)
		if rel == "bb" || strings.HasPrefix(rel, "bb"+string(filepath.Separator)) {
			return nil
		}
		fmt.Fprintf(&b, "%s %v", rel, fi.Mode())
		if fi.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			fmt.Fprintf(&b, " -> %s", target)
		} else if fi.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %q", data)
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// When a browser's host started a new bridge before restart's own start
// (the host sees its bridge go and starts one at once), restart says the
// bridge is running again, not "already running" after "stopped", which
// read as a failure (issue 31, item 9).
func TestRestartWhenAHostStartedTheBridgeFirst(t *testing.T) {
	w := newWorld(t)
	w.killBridgeAtEnd()
	out, code := w.cli("start")
	m := startedPID.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("start: exit %d\n%s", code, out)
	}
	pid, _ := strconv.Atoi(m[1])
	// The state restart is in once its stop ended bridge pid-1 and a host
	// started pid: the running bridge is not the one it stopped.
	var buf bytes.Buffer
	lc := &lifecycle{cfg: &config.Config{Socket: w.socket}, stdout: &buf, stderr: &buf, restarting: true, stoppedPID: pid + 100000}
	if err := lc.start(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("The bridge is running again (pid %d): a browser's host started it", pid)
	if got := buf.String(); !strings.Contains(got, want) || strings.Contains(got, "already running") {
		t.Fatalf("restart's start said %q, want %q", got, want)
	}
}

// A bridge stopped with `browserbridge stop` is one problem in doctor,
// not three (bridge, service, extension), and status says it was stopped
// on purpose and how to start it, as the popup does (issue 31, item 8).
func TestDoctorAndStatusAfterStop(t *testing.T) {
	w := newWorld(t)
	w.killBridgeAtEnd()
	w.chromiumProfile()
	if out, code := w.cli("install", "--browser", "chromium", "--no-service"); code != 0 {
		t.Fatalf("install: %s", out)
	}
	if out, code := w.cli("start"); code != 0 {
		t.Fatalf("start: exit %d\n%s", code, out)
	}
	if out, code := w.cli("stop"); code != 0 {
		t.Fatalf("stop: exit %d\n%s", code, out)
	}
	out, code := w.cli("doctor")
	if code != 1 || !strings.Contains(out, "\n1 problem(s) found.") || !strings.Contains(out, "FAIL  bridge             stopped on purpose with `browserbridge stop`") ||
		!strings.Contains(out, "fix: `browserbridge start` starts it again") {
		t.Fatalf("doctor after stop: exit %d\n%s", code, out)
	}
	out, code = w.cli("status")
	if code != 1 || !strings.Contains(out, "The bridge is stopped: stopped with `browserbridge stop` at ") || !strings.Contains(out, "on purpose. Run `browserbridge start` to start it again") ||
		strings.Contains(out, "not running") {
		t.Fatalf("status after stop: exit %d\n%s", code, out)
	}
}

// clients remove takes away the ~/.cursor and mcp.json that clients add
// created, and clients list no longer calls Cursor installed; uninstall
// takes the bridge out of every client's config before removing the
// program, and says what stays and why (issue 31, item 7).
func TestUninstallAndRemoveTakeClientEntries(t *testing.T) {
	w := newWorld(t)
	w.chromiumProfile()
	cfgFile := filepath.Join(w.home, "bb", "config", "config.json")
	if err := os.WriteFile(cfgFile, []byte(`{"listen":"127.0.0.1:3999"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cursorDir := filepath.Join(w.home, ".cursor")
	if out, code := w.cli("clients", "add", "cursor"); code != 0 {
		t.Fatalf("clients add cursor: exit %d\n%s", code, out)
	}
	out, code := w.cli("clients", "remove", "cursor")
	if code != 0 || !strings.Contains(out, "deleted "+filepath.Join(cursorDir, "mcp.json")+", "+cursorDir) {
		t.Fatalf("clients remove cursor: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(cursorDir); !os.IsNotExist(err) {
		t.Fatalf("~/.cursor outlived clients remove: %v", err)
	}
	if out, _ := w.cli("clients", "list"); !strings.Contains(out, "cursor          no") {
		t.Fatalf("clients list after remove:\n%s", out)
	}

	// The user's own Claude Desktop config, and Claude Code's file with
	// the bridge's entry while its CLI is not on PATH.
	desktop := filepath.Join(w.home, ".config", "Claude", "claude_desktop_config.json")
	os.MkdirAll(filepath.Dir(desktop), 0o700)
	mine := "{\n  \"mcpServers\": {\n    \"fs\": {\"command\": \"npx\", \"args\": [\"server-filesystem\"]}\n  }\n}\n"
	os.WriteFile(desktop, []byte(mine), 0o600)
	os.WriteFile(filepath.Join(w.home, ".claude.json"), []byte(`{"mcpServers": {"browserbridge": {"type": "http", "url": "http://127.0.0.1:3999/mcp"}}}`), 0o600)
	for _, c := range []string{"cursor", "claude-desktop"} {
		if out, code := w.cli("clients", "add", c); code != 0 {
			t.Fatalf("clients add %s: exit %d\n%s", c, code, out)
		}
	}
	if out, code := w.cli("install", "--browser", "chromium", "--no-service"); code != 0 {
		t.Fatalf("install: %s", out)
	}
	out, code = w.cli("uninstall")
	if code != 0 {
		t.Fatalf("uninstall: exit %d\n%s", code, out)
	}
	for _, want := range []string{
		"cursor: browserbridge removed", "claude-desktop: browserbridge removed",
		"claude-code: browserbridge stays (the claude CLI is not on PATH); remove it with: claude mcp remove --scope user browserbridge",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("uninstall does not say %q:\n%s", want, out)
		}
	}
	if got, _ := os.ReadFile(desktop); string(got) != mine {
		t.Errorf("Claude Desktop's config after uninstall:\n%s\nwant the user's as it was:\n%s", got, mine)
	}
	for _, gone := range []string{cursorDir, desktop + ".bak"} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s outlived uninstall: %v", gone, err)
		}
	}
}
