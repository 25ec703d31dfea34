package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/browserbridge/browserbridge/bridge/internal/service"
	"github.com/browserbridge/browserbridge/installer"
)

// hostPath is the browserbridge-host beside this executable: install.sh
// puts both in one directory, and the manifest must name an absolute path.
func hostPath() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding this executable: %w", err)
	}
	if r, err := filepath.EvalSymlinks(self); err == nil {
		self = r
	}
	name := "browserbridge-host"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	return filepath.Join(filepath.Dir(self), name), nil
}

func selfPath() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding this executable: %w", err)
	}
	if r, err := filepath.EvalSymlinks(self); err == nil {
		self = r
	}
	return self, nil
}

func runInstall(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("install", stderr)
	browser := fs.String("browser", "", "chrome|chromium|edge|brave|vivaldi|all, or a comma list (default: every browser found; keys: "+strings.Join(installer.Browsers(), ", ")+")")
	userDataDir := fs.String("user-data-dir", "", "register only for the browser profile in DIR (DIR/NativeMessagingHosts)")
	system := fs.Bool("system", false, "register for every user of this machine (needs root or Administrator)")
	noService := fs.Bool("no-service", false, "do not install the autostart service")
	if err := parse(fs, args); err != nil {
		return err
	}
	host, err := hostPath()
	if err != nil {
		return err
	}
	opts := installer.Options{UserDataDir: *userDataDir, System: *system, HostPath: host}
	if *browser != "" {
		opts.Browsers = []string{*browser}
	}
	rec, err := installer.Install(opts)
	if rec != nil {
		for _, m := range rec.Manifests {
			who := strings.Join(m.Browsers, ", ")
			if who == "" {
				who = "profile " + m.UserDataDir
			}
			fmt.Fprintf(stdout, "registered the native host for %s: %s\n", who, m.Path)
		}
		for _, k := range rec.RegistryKeys {
			if k.Manifest != "" {
				fmt.Fprintf(stdout, "registry: %s\\%s\n", k.Root, k.Path)
			}
		}
	}
	if err != nil {
		return err
	}
	if *noService {
		return nil
	}
	self, err := selfPath()
	if err != nil {
		return err
	}
	if err := service.Control("install", self); err != nil && !errors.Is(err, service.ErrAlreadyInstalled) {
		fmt.Fprintf(stderr, "service not installed: %v\n", err)
		return nil // the host starts the bridge on demand; doctor reports this
	}
	if err := service.Control("start", self); err != nil {
		fmt.Fprintf(stderr, "service installed but not started: %v\n", err)
		return nil
	}
	fmt.Fprintln(stdout, "installed and started the browserbridge service")
	return nil
}

func runUninstall(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("uninstall", stderr)
	keepService := fs.Bool("keep-service", false, "leave the autostart service installed")
	if err := parse(fs, args); err != nil {
		return err
	}
	removed, err := installer.Uninstall()
	for _, r := range removed {
		fmt.Fprintf(stdout, "removed %s\n", r)
	}
	if err != nil {
		return err
	}
	if *keepService {
		return nil
	}
	self, err := selfPath()
	if err != nil {
		return err
	}
	st, err := service.Status(self)
	if st == service.StateNotInstalled || errors.Is(err, service.ErrNoUserManager) {
		return nil // no service to remove: none could have been installed
	}
	_ = service.Control("stop", self)
	if err := service.Control("uninstall", self); err != nil {
		return fmt.Errorf("removing the service: %w", err)
	}
	fmt.Fprintln(stdout, "removed the browserbridge service")
	return nil
}

func runService(_ context.Context, args []string, stdout, stderr io.Writer) error {
	const actions = "install|uninstall|start|stop|restart|status"
	if len(args) != 1 {
		return usageError{"usage: browserbridge service " + actions}
	}
	self, err := selfPath()
	if err != nil {
		return err
	}
	switch args[0] {
	case "status":
		st, err := service.Status(self)
		fmt.Fprintln(stdout, st)
		if err != nil {
			fmt.Fprintln(stderr, err)
		}
		if st != service.StateRunning {
			return errSilent
		}
		return nil
	case "install", "uninstall", "start", "stop", "restart":
		if err := service.Control(args[0], self); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "service %s: done\n", args[0])
		return nil
	}
	return usageError{fmt.Sprintf("unknown action %q; use %s", args[0], actions)}
}

// serviceState describes the service for status and doctor.
func serviceState() string {
	self, err := selfPath()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	st, err := service.Status(self)
	if err != nil {
		return fmt.Sprintf("%s (%v)", st, err)
	}
	return st.String()
}
