package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/browserbridge/browserbridge/bridge/paths"
	"github.com/browserbridge/browserbridge/installer"
)

// uninstall holds what `browserbridge uninstall` removes besides the
// install record's list: the bridge's state, the runtime folder, and with
// --purge the config and the logs.
type uninstall struct {
	purge          bool
	stdout, stderr io.Writer
	socket         string
	configDir      string
	logDir         string
	logFile        string // the configured log file, if outside logDir
	stateDir       string
}

func newUninstall(purge bool, stdout, stderr io.Writer) (*uninstall, error) {
	u := &uninstall{purge: purge, stdout: stdout, stderr: stderr}
	var err error
	if u.configDir, err = paths.ConfigDir(); err != nil {
		return nil, err
	}
	if u.logDir, err = paths.LogDir(); err != nil {
		return nil, err
	}
	if u.stateDir, err = paths.StateDir(); err != nil {
		return nil, err
	}
	if cfg, err := loadConfig("", "", ""); err == nil {
		u.socket = cfg.Socket
		if f := cfg.Log.File; f != "" && f != "-" && !within(f, u.logDir) {
			u.logFile = f
		}
	} else {
		fmt.Fprintf(stderr, "warning: reading the config: %v (uninstalling with the default paths)\n", err)
		if u.socket, err = paths.Socket(); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// stopAndClean stops what runs from the installed files, then removes what
// the bridge wrote: its state and runtime folder, and with --purge the
// config and the logs. It runs between the hosts' unregistering and the
// removal of the installed files.
func (u *uninstall) stopAndClean(ctx context.Context, rec *installer.Record) error {
	if err := u.stopAll(ctx, rec); err != nil {
		return err // something still runs: leave its files be
	}
	u.cleanRuntime()
	remove := u.stateEntries()
	if u.purge {
		remove = []string{u.configDir, u.logDir, u.stateDir}
		if u.logFile != "" {
			remove = append(remove, logFiles(u.logFile)...)
		}
	}
	var errs []error
	for _, p := range remove {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", p, err))
			continue
		}
		fmt.Fprintf(u.stdout, "removed %s\n", p)
	}
	return errors.Join(errs...)
}

// stateEntries are the bridge's state (the last tool list, session
// records): everything in the state folder but the logs, when they share it,
// the runtime folder, when it is there (Windows), and the manifests'
// folders, which the record covers.
func (u *uninstall) stateEntries() []string {
	entries, err := os.ReadDir(u.stateDir)
	if err != nil {
		return nil
	}
	runtimeDir := filepath.Dir(u.socket)
	var out []string
	for _, e := range entries {
		p := filepath.Join(u.stateDir, e.Name())
		switch {
		case within(u.logDir, p): // the log folder, or one holding it
		case u.stateDir == u.logDir && isLogName(e.Name()):
		case u.stateDir == runtimeDir && (p == u.socket || e.Name() == lockName):
		case e.Name() == "NativeMessagingHosts":
		default:
			out = append(out, p)
		}
	}
	return out
}

// lockName is the bridge's lock file in the socket's folder (bridge/ipc).
const lockName = "bridge.lock"

// isLogName reports whether a file in the log folder is a log: the bridge's
// log, its rotated copies, a detached bridge's output.
func isLogName(name string) bool {
	return strings.HasSuffix(name, ".log") || strings.HasSuffix(name, ".log.gz")
}

// logFiles are a log file outside the log folder and its rotated copies.
func logFiles(file string) []string {
	stem := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(file), stem+"-*"+filepath.Ext(file)+"*"))
	return append([]string{file}, matches...)
}

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// stopAll stops the browser hosts started from the installed host program,
// then the bridge, before their files go. The hosts go first: a host that
// loses the bridge starts a new one.
func (u *uninstall) stopAll(ctx context.Context, rec *installer.Record) error {
	var pids []int
	for _, m := range rec.Manifests {
		for _, pid := range processesOf(m.HostPath) {
			if !slices.Contains(pids, pid) {
				pids = append(pids, pid)
			}
		}
	}
	st, statusErr := queryStatus(ctx, u.socket)
	if statusErr == nil {
		for _, b := range st.Browsers {
			if b.HostPID > 0 && !slices.Contains(pids, b.HostPID) && alive(b.HostPID) {
				pids = append(pids, b.HostPID)
			}
		}
	}
	var errs []error
	for _, pid := range pids {
		if err := stopPID(ctx, "the browser host", pid, u.stderr, ""); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(u.stdout, "stopped the browser host (pid %d)\n", pid)
	}
	if st, err := queryStatus(ctx, u.socket); err == nil {
		if err := stopPID(ctx, "the bridge", st.PID, u.stderr, st.LogFile); err != nil {
			return errors.Join(append(errs, err)...)
		}
		fmt.Fprintf(u.stdout, "stopped the bridge (pid %d)\n", st.PID)
	}
	return errors.Join(errs...)
}

// cleanRuntime removes the lock a stopped bridge leaves in its runtime
// folder, and the folder when it is the bridge's own and now empty.
func (u *uninstall) cleanRuntime() {
	dir := filepath.Dir(u.socket)
	for _, p := range []string{u.socket, filepath.Join(dir, lockName)} {
		if err := os.Remove(p); err == nil {
			fmt.Fprintf(u.stdout, "removed %s\n", p)
		}
	}
	if !strings.HasPrefix(strings.ToLower(filepath.Base(dir)), "browserbridge") {
		return // a folder BROWSERBRIDGE_SOCKET names may hold others' files
	}
	if err := os.Remove(dir); err == nil {
		fmt.Fprintf(u.stdout, "removed %s\n", dir)
	}
}

// reportKept says which of the config and the logs are left, and where.
func (u *uninstall) reportKept() {
	if u.purge {
		return
	}
	var kept []string
	for _, k := range []struct{ what, path string }{{"the config", u.configDir}, {"the logs", u.logDir}, {"the log file", u.logFile}} {
		if k.path == "" || isEmptyDir(k.path) {
			continue
		}
		if _, err := os.Stat(k.path); err != nil {
			continue
		}
		fmt.Fprintf(u.stdout, "kept %s in %s\n", k.what, k.path)
		kept = append(kept, shellQuote(k.path))
	}
	if len(kept) > 0 {
		fmt.Fprintf(u.stdout, "(uninstall --purge removes them too; or: rm -rf %s)\n", strings.Join(kept, " "))
	}
}

func isEmptyDir(p string) bool {
	entries, err := os.ReadDir(p)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	return err == nil && len(entries) == 0
}

// shellQuote quotes p for a POSIX shell.
func shellQuote(p string) string { return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'" }
