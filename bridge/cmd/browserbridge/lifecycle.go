package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/service"
	"github.com/browserbridge/browserbridge/bridge/paths"
)

// `browserbridge start`, `stop` and `restart` work with a service manager
// and without one: the service when it is installed and usable, otherwise the
// running bridge's pid (from bridge.status over its socket) to stop it and a
// detached `browserbridge serve` to start it.

// termWait is how long stop waits for the bridge to exit after SIGTERM (the
// bridge itself gives its work 5 s to finish). A variable for a test.
var termWait = 15 * time.Second

// Deadlines of the lifecycle commands. They bound how long a command waits
// for a process, never the order of events.
const (
	// killWait is how long stop waits again after SIGKILL.
	killWait = 5 * time.Second
	// startWait is how long start waits for a new bridge to answer.
	startWait = 60 * time.Second
	// pollEvery is how often a wait looks again.
	pollEvery = 50 * time.Millisecond
)

// startOutName is the file in the log folder that a detached bridge's
// stdout and stderr go to: what it says before its log is open (a bad
// config) and as it exits. Each start truncates it.
const startOutName = "serve-stderr.log"

// lifecycle is what start, stop and restart act on.
type lifecycle struct {
	cfgPath string // --config, passed on to serve
	socket  string // --socket, passed on to serve
	cfg     *config.Config
	self    string
	stdout  io.Writer
	stderr  io.Writer
	// restarting is set by restart: stop then start say one story.
	restarting bool
	stoppedPID int // the bridge restart stopped, 0 if none
}

func newLifecycle(name string, args []string, stdout, stderr io.Writer) (*lifecycle, error) {
	fs := newFlags(name, stderr)
	cfgPath := fs.String("config", "", "config file (default: the per-user config.json, if present)")
	socket := fs.String("socket", "", "bridge socket (default: per-user, or $BROWSERBRIDGE_SOCKET)")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	cfg, err := loadConfig(*cfgPath, "", *socket)
	if err != nil {
		return nil, err
	}
	self, err := selfPath()
	if err != nil {
		return nil, err
	}
	return &lifecycle{cfgPath: *cfgPath, socket: *socket, cfg: cfg, self: self, stdout: stdout, stderr: stderr}, nil
}

func runStart(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	lc, err := newLifecycle("start", args, stdout, stderr)
	if err != nil {
		return err
	}
	return lc.start(ctx)
}

func runStop(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	lc, err := newLifecycle("stop", args, stdout, stderr)
	if err != nil {
		return err
	}
	// The marker first: a browser's host that loses the bridge while it
	// stops must find it, or it starts a new bridge at once.
	if err := lc.markStopped(); err != nil {
		return err
	}
	_, err = lc.stop(ctx)
	return err
}

// markStopped leaves paths.StopMarker, which keeps the browsers' hosts from
// starting a bridge until start, restart or serve removes it.
func (lc *lifecycle) markStopped() error {
	marker := paths.StopMarker(lc.cfg.Socket)
	if err := os.MkdirAll(filepath.Dir(marker), 0o700); err != nil {
		return fmt.Errorf("keeping the bridge stopped: %w", err)
	}
	note := "stopped with `browserbridge stop` at " + time.Now().Format(time.RFC3339) + "; `browserbridge start` removes this file\n"
	if err := os.WriteFile(marker, []byte(note), 0o600); err != nil {
		return fmt.Errorf("keeping the bridge stopped: %w", err)
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// clearStopped removes the marker markStopped left, if any.
func clearStopped(socket string) error {
	if err := os.Remove(paths.StopMarker(socket)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing the stop marker: %w", err)
	}
	return nil
}

func runRestart(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	lc, err := newLifecycle("restart", args, stdout, stderr)
	if err != nil {
		return err
	}
	lc.restarting = true
	stopped, err := lc.stop(ctx)
	if err != nil {
		return err
	}
	lc.stoppedPID = stopped
	return lc.start(ctx)
}

// usableService reports the service's state when a service manager is
// usable here and the service is installed.
func usableService(self string) (service.State, bool) {
	if service.Available() != nil {
		return service.StateUnknown, false
	}
	st, err := service.Status(self)
	if err != nil || st == service.StateNotInstalled {
		return st, false
	}
	return st, true
}

// stop stops the bridge: the service if it runs, then whatever bridge still
// answers on the socket, by its pid. It reports the pid it stopped, 0 if no
// bridge was running.
func (lc *lifecycle) stop(ctx context.Context) (int, error) {
	stoppedService := false
	if st, ok := usableService(lc.self); ok && st == service.StateRunning {
		if err := service.Control(service.ActionStop, lc.self); err != nil {
			return 0, err
		}
		stoppedService = true
		fmt.Fprintln(lc.stdout, "stopped the browserbridge service")
		// The service manager stops the bridge; wait until it no longer
		// answers, and fall through to its pid if it still does.
		waitUntil(ctx, termWait, func() bool { _, err := queryStatus(ctx, lc.cfg.Socket); return err != nil })
	}
	st, err := queryStatus(ctx, lc.cfg.Socket)
	if err != nil {
		// Within a restart, start says what happened next; "not running"
		// before "started" reads as a failure.
		if !stoppedService && !lc.restarting {
			fmt.Fprintln(lc.stdout, "The bridge is not running.")
		}
		return 0, nil
	}
	if err := stopPID(ctx, "the bridge", st.PID, lc.stderr, st.LogFile); err != nil {
		return st.PID, err
	}
	fmt.Fprintf(lc.stdout, "stopped the bridge (pid %d)\n", st.PID)
	if st.Hosts > 0 && fileExists(paths.StopMarker(lc.cfg.Socket)) {
		fmt.Fprintf(lc.stdout, "%d browser host(s) were attached; they will not start the bridge again until `%s`\n", st.Hosts, startHint())
	}
	return st.PID, nil
}

// stopPID sends pid terminate, waits for it to exit, and kills it if it
// will not, saying so on stderr.
func stopPID(ctx context.Context, what string, pid int, stderr io.Writer, logFile string) error {
	if err := terminate(pid); err != nil {
		return fmt.Errorf("stopping %s (pid %d): %w", what, pid, err)
	}
	if waitUntil(ctx, termWait, func() bool { return !alive(pid) }) {
		return nil
	}
	where := ""
	if logFile != "" {
		where = "; its log: " + logFile
	}
	fmt.Fprintf(stderr, "%s (pid %d) did not exit within %s of %s; killing it%s\n", what, pid, termWait, termName, where)
	if err := kill(pid); err != nil {
		return fmt.Errorf("killing %s (pid %d): %w", what, pid, err)
	}
	if waitUntil(ctx, killWait, func() bool { return !alive(pid) }) {
		return nil
	}
	return fmt.Errorf("%s (pid %d) is still running after being killed; it may belong to another user or be stuck in the kernel", what, pid)
}

// waitUntil polls done until it reports true, the wait ends or ctx does, and
// reports done's last answer.
func waitUntil(ctx context.Context, wait time.Duration, done func() bool) bool {
	deadline := time.Now().Add(wait)
	for {
		if done() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(pollEvery):
		}
	}
}

// start starts the bridge, through the service if one is installed and
// usable, otherwise as a detached `browserbridge serve`, and waits until it
// answers.
func (lc *lifecycle) start(ctx context.Context) error {
	if err := clearStopped(lc.cfg.Socket); err != nil {
		return err
	}
	if st, err := queryStatus(ctx, lc.cfg.Socket); err == nil {
		if lc.restarting && st.PID != lc.stoppedPID {
			// A browser's host saw its bridge go and started a new one
			// first: the restart happened all the same.
			fmt.Fprintf(lc.stdout, "The bridge is running again (pid %d): a browser's host started it as soon as the old one stopped.\n", st.PID)
			return nil
		}
		fmt.Fprintf(lc.stdout, "The bridge is already running (pid %d).\n", st.PID)
		return nil
	}
	if _, ok := usableService(lc.self); ok {
		return lc.startService(ctx)
	}
	return lc.startDetached(ctx)
}

func (lc *lifecycle) startService(ctx context.Context) error {
	if err := service.Control(service.ActionStart, lc.self); err != nil {
		return fmt.Errorf("%w%s", err, lc.logTail())
	}
	var pid int
	up := waitUntil(ctx, startWait, func() bool {
		st, err := queryStatus(ctx, lc.cfg.Socket)
		if err == nil {
			pid = st.PID
		}
		return err == nil
	})
	if !up {
		return fmt.Errorf("the browserbridge service started but no bridge answers at %s after %s%s", lc.cfg.Socket, startWait, lc.logTail())
	}
	fmt.Fprintf(lc.stdout, "started the browserbridge service (bridge pid %d)\n", pid)
	return nil
}

func (lc *lifecycle) startDetached(ctx context.Context) error {
	logDir, err := paths.LogDir()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return fmt.Errorf("creating the log folder: %w", err)
	}
	outPath := filepath.Join(logDir, startOutName)
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("opening %s: %w", outPath, err)
	}
	args := []string{"serve", "--log-stderr=false"}
	if lc.cfgPath != "" {
		args = append(args, "--config", lc.cfgPath)
	}
	if lc.socket != "" {
		args = append(args, "--socket", lc.socket)
	}
	cmd := exec.Command(lc.self, args...)
	cmd.Stdout, cmd.Stderr = out, out // stdin stays /dev/null
	detach(cmd)
	err = cmd.Start()
	out.Close()
	if err != nil {
		return fmt.Errorf("starting %s serve: %w", lc.self, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.NewTimer(startWait)
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			// Another bridge (a browser's host starts one) may have won the
			// socket; then the bridge is running all the same.
			if st, qerr := queryStatus(ctx, lc.cfg.Socket); qerr == nil {
				fmt.Fprintf(lc.stdout, "The bridge is running (pid %d).\n", st.PID)
				return nil
			}
			return fmt.Errorf("the bridge did not start (%v): %s", err, lc.reason(outPath))
		case <-tick.C:
			st, err := queryStatus(ctx, lc.cfg.Socket)
			if err != nil {
				continue
			}
			if st.PID == cmd.Process.Pid {
				fmt.Fprintf(lc.stdout, "started the bridge (pid %d); its log: %s\n", st.PID, st.LogFile)
			} else {
				fmt.Fprintf(lc.stdout, "The bridge is running (pid %d).\n", st.PID)
			}
			return nil
		case <-deadline.C:
			return fmt.Errorf("the bridge (pid %d) did not answer at %s within %s: %s", cmd.Process.Pid, lc.cfg.Socket, startWait, lc.reason(outPath))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// reason is what a bridge that did not come up said: the output of the
// detached serve, else the end of its log.
func (lc *lifecycle) reason(outPath string) string {
	if b, err := os.ReadFile(outPath); err == nil && len(bytes.TrimSpace(b)) > 0 {
		return lastLines(string(b), 10) + "\n(from " + outPath + ")"
	}
	if t := lc.logTail(); t != "" {
		return strings.TrimPrefix(t, "\n")
	}
	return "it said nothing; run `" + cliName() + " serve` to see it fail"
}

// logTail is the end of the bridge's log, on lines of its own after a
// newline, or "" if there is none.
func (lc *lifecycle) logTail() string {
	if lc.cfg.Log.File == "" || lc.cfg.Log.File == "-" {
		return ""
	}
	b, err := os.ReadFile(lc.cfg.Log.File)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	return "\nthe end of " + lc.cfg.Log.File + ":\n" + lastLines(string(b), 5)
}

// lastLines returns the last n lines of s, indented.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}
