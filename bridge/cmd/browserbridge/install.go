package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/browserbridge/browserbridge/bridge/internal/cliflags"
	"github.com/browserbridge/browserbridge/bridge/internal/service"
	"github.com/browserbridge/browserbridge/bridge/paths"
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

// proxyPath is the cloud proxy's program beside this one (make build puts
// it there), for install --prefix to install with the others.
func proxyPath() (string, error) {
	host, err := hostPath()
	if err != nil {
		return "", err
	}
	name := "browserbridge-proxy"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	return filepath.Join(filepath.Dir(host), name), nil
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
	prefix := fs.String("prefix", "", "first copy this program, browserbridge-host beside it and the extension into DIR/bin and DIR/extension, and use those (install.sh passes ~/.local/share/browserbridge)")
	bindir := fs.String("bindir", "", "with --prefix: link browserbridge into DIR")
	extSrc := fs.String("extension", "", "with --prefix: the extension's source folder to copy (its runtime files only)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *prefix == "" && (*bindir != "" || *extSrc != "") {
		return cliflags.Usage("--bindir and --extension go with --prefix")
	}
	host, err := hostPath()
	if err != nil {
		return err
	}
	self, err := selfPath()
	if err != nil {
		return err
	}
	if *prefix != "" {
		if host, self, err = installFiles(*prefix, *bindir, *extSrc, host, self, stdout); err != nil {
			return err
		}
		installedSelf = self
	}
	// The folders the bridge writes into later, recorded if install creates
	// them, so that uninstall leaves no empty folder behind.
	if dirs, err := bridgeDirs(); err == nil {
		if err := installer.MakeDirs(dirs...); err != nil {
			fmt.Fprintf(stderr, "warning: %v\n", err)
		}
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
	if err := service.Available(); err != nil {
		fmt.Fprintf(stdout, "no autostart service: no per-user service manager here (`%s doctor` says more); `%s` starts the bridge\n", cliName(), startHint())
		return nil
	}
	if dir, err := service.UnitDir(); err == nil && dir != "" {
		if err := installer.MakeDirs(dir); err != nil {
			fmt.Fprintf(stderr, "warning: %v\n", err)
		}
	}
	if err := service.Control(service.ActionInstall, self); err != nil && !errors.Is(err, service.ErrAlreadyInstalled) {
		fmt.Fprintf(stderr, "service not installed: %v\n", err)
		return nil // the host starts the bridge on demand; doctor reports this
	}
	if err := service.Control(service.ActionStart, self); err != nil {
		fmt.Fprintf(stderr, "service installed but not started: %v\n", err)
		return nil
	}
	fmt.Fprintln(stdout, "installed and started the browserbridge service")
	return nil
}

// installFiles copies the programs and the extension under prefix, links
// the CLI into bindir, and returns the installed host and CLI.
func installFiles(prefix, bindir, extSrc, host, self string, stdout io.Writer) (newHost, newSelf string, err error) {
	abs := func(p string) (string, error) {
		if p == "" {
			return "", nil
		}
		return filepath.Abs(p)
	}
	if prefix, err = abs(prefix); err != nil {
		return "", "", err
	}
	if bindir, err = abs(bindir); err != nil {
		return "", "", err
	}
	if extSrc, err = abs(extSrc); err != nil {
		return "", "", err
	}
	exes := []string{self, host}
	// The proxy is for whoever runs one (an operator), so a build without
	// it installs the rest and says where it would have come from.
	proxyExe, perr := proxyPath()
	if perr == nil && fileExists(proxyExe) {
		exes = append(exes, proxyExe)
	} else if perr == nil && !fileExists(proxyExe) {
		fmt.Fprintf(stdout, "not installing browserbridge-proxy (the cloud proxy, for running one): there is none at %s; `make build` builds it there\n", proxyExe)
	}
	res, err := installer.InstallFiles(installer.Files{
		Prefix:       prefix,
		Executables:  exes,
		ExtensionSrc: extSrc,
		BinDir:       bindir,
		Link:         filepath.Base(self),
	})
	if err != nil {
		return "", "", err
	}
	names := make([]string, len(exes))
	for i, e := range exes {
		names[i] = filepath.Base(e)
	}
	fmt.Fprintf(stdout, "installed %s into %s\n", strings.Join(names, ", "), res.Bin)
	if res.Extension != "" {
		fmt.Fprintf(stdout, "installed the extension into %s\n", res.Extension)
		if res.ExtensionReplaced {
			fmt.Fprintln(stdout, "the extension's files changed: reload it in the browser (chrome://extensions → Browser Bridge → reload ↻)")
		}
	}
	if res.Link != "" {
		fmt.Fprintf(stdout, "linked %s -> %s\n", res.Link, filepath.Join(res.Bin, filepath.Base(self)))
	}
	return filepath.Join(res.Bin, filepath.Base(host)), filepath.Join(res.Bin, filepath.Base(self)), nil
}

// bridgeDirs are the folders the bridge keeps its state and logs in.
func bridgeDirs() ([]string, error) {
	state, err := paths.StateDir()
	if err != nil {
		return nil, err
	}
	logs, err := paths.LogDir()
	if err != nil {
		return nil, err
	}
	return []string{state, logs}, nil
}

func runUninstall(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("uninstall", stderr)
	keepService := fs.Bool("keep-service", false, "leave the autostart service installed")
	purge := fs.Bool("purge", false, "also remove the config and the logs")
	if err := parse(fs, args); err != nil {
		return err
	}
	self, err := selfPath()
	if err != nil {
		return err
	}
	var errs []error
	// The service first, so that its manager does not start the bridge again.
	if !*keepService {
		if _, ok := usableService(self); ok {
			if err := service.Control(service.ActionUninstall, self); err != nil {
				errs = append(errs, fmt.Errorf("removing the service: %w", err))
			} else {
				fmt.Fprintln(stdout, "removed the browserbridge service")
			}
		}
	}
	u, err := newUninstall(*purge, stdout, stderr)
	if err != nil {
		return err
	}
	// The clients' entries before the program goes (and the state folder,
	// where clients add noted the files it created).
	removeFromClients(ctx, stdout, stderr)
	removed, err := installer.UninstallWith(installer.UninstallOptions{
		Stop: func(rec *installer.Record) error { return u.stopAndClean(ctx, rec) },
	})
	for _, r := range removed {
		// What was inside a removed folder of ours (the prefix) goes
		// without a line of its own.
		if !insideRemoved(r, removed) {
			fmt.Fprintf(stdout, "removed %s\n", r)
		}
	}
	if err != nil {
		errs = append(errs, err)
	}
	u.reportKept()
	fmt.Fprintln(stdout, "Remove the extension from the browser too: chrome://extensions → Browser Bridge → Remove.")
	return errors.Join(errs...)
}

// insideRemoved reports whether p is inside a removed folder named
// browserbridge*.
func insideRemoved(p string, removed []string) bool {
	for d := filepath.Dir(p); d != filepath.Dir(d); d = filepath.Dir(d) {
		if strings.HasPrefix(strings.ToLower(filepath.Base(d)), "browserbridge") && slices.Contains(removed, d) {
			return true
		}
	}
	return false
}

func runService(_ context.Context, args []string, stdout, stderr io.Writer) error {
	const actions = "install|uninstall|start|stop|restart|status"
	if len(args) != 1 {
		return cliflags.Usage("usage: browserbridge service " + actions)
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
	return cliflags.Usage(fmt.Sprintf("unknown action %q; use %s", args[0], actions))
}

// serviceState describes the service in a few words, for status: doctor's
// service check is where the long story goes.
func serviceState() string {
	if service.Available() != nil {
		return "none (no per-user service manager here)"
	}
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
