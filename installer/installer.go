// Package installer registers browserbridge-host as a native-messaging host
// with every Chromium browser on Linux, macOS and Windows, checks that
// registration for `browserbridge doctor`, and removes it again.
//
// On Linux and macOS registering means writing com.browserbridge.host.json
// into the browser's NativeMessagingHosts directory. On Windows the manifest
// goes under %LOCALAPPDATA%\BrowserBridge\NativeMessagingHosts\<browser> and
// a registry key under HKCU (HKLM for a system install) names it.
//
// Everything Install writes is listed in the record file at
// paths.InstallRecord(), and Uninstall removes exactly that list. None of the
// functions is safe to run concurrently with another install or uninstall of
// the same user.
package installer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/browserbridge/browserbridge/bridge/atomicfile"
	"github.com/browserbridge/browserbridge/bridge/paths"
	"github.com/browserbridge/browserbridge/extension"
	"github.com/browserbridge/browserbridge/manifests"
)

// AllBrowsers may be given in Options.Browsers to mean every browser the
// installer knows on this OS, installed or not.
const AllBrowsers = "all"

// Registry roots as recorded in RegistryEntry.Root.
const (
	rootUser    = "HKCU"
	rootMachine = "HKLM"
)

var (
	// ErrUnknownBrowser is wrapped by Install's error when Options.Browsers
	// names a browser the installer does not know on this OS.
	ErrUnknownBrowser = errors.New("unknown browser")
	// ErrNoBrowser is wrapped by Install's error when no browser was named
	// and none was detected.
	ErrNoBrowser = errors.New("no supported browser found")
)

// errRegistryNotFound is returned by GetDefault for a missing key or value.
var errRegistryNotFound = errors.New("registry key not found")

// winRegistry is the part of the Windows registry the installer uses. Roots
// are "HKCU" and "HKLM"; paths use backslashes.
type winRegistry interface {
	// SetDefault creates root\path if needed and sets its default value,
	// returning the keys it had to create, outermost first.
	SetDefault(root, path, value string) (created []string, err error)
	// GetDefault returns the default value of root\path, or
	// errRegistryNotFound.
	GetDefault(root, path string) (string, error)
	// Delete deletes root\path, reporting false if it did not exist.
	Delete(root, path string) (bool, error)
	// DeleteIfEmpty deletes root\path if it has no subkeys and no values.
	DeleteIfEmpty(root, path string) (bool, error)
}

var _ winRegistry = systemRegistry{}

// reg is the registry Install, Uninstall and Check use; tests replace it.
var reg winRegistry = systemRegistry{}

// Options says what Install registers and where. The zero value is not
// usable: HostPath is required.
type Options struct {
	// Browsers are browser keys (see Browsers), or "all". Commas also
	// separate keys. Empty means every browser Detect finds.
	Browsers []string
	// UserDataDir, if set, writes the manifest into
	// UserDataDir/NativeMessagingHosts instead of the browser's default
	// location, for a browser started with --user-data-dir. It allows at
	// most one browser in Browsers and is not supported on Windows, where
	// browsers find hosts only through the registry.
	UserDataDir string
	// System installs for every user of the machine (a system directory, or
	// HKLM on Windows), which needs root or Administrator. False installs
	// for the current user.
	System bool
	// HostPath is the absolute path of the browserbridge-host executable.
	// It must exist and be executable.
	HostPath string
	// ExtensionIDs are the extension ids allowed to connect. Empty means
	// extension.ID(), the id of the Browser Bridge extension.
	ExtensionIDs []string
}

// target is one manifest file to write, and on Windows the registry keys
// that point at it.
type target struct {
	browsers    []string
	names       []string // display names, for messages
	dir         string
	system      bool
	userDataDir string
	regRoot     string
	regKeys     []string
}

func (t target) label() string {
	switch {
	case len(t.names) > 0:
		return strings.Join(t.names, ", ")
	case t.userDataDir != "":
		return "the browser profile at " + t.userDataDir
	}
	return t.dir
}

// Install writes the host manifest for each browser opts selects, merges
// what it wrote into the record file, and returns a Record of what this call
// wrote (the file on disk holds the union with earlier installs). Running it
// twice with the same options leaves the same files and one record entry
// each. If some targets fail, the others are still written and recorded, and
// the error names each failure.
func Install(opts Options) (*Record, error) {
	e, err := currentEnv()
	if err != nil {
		return nil, err
	}
	return install(e, opts)
}

func install(e env, opts Options) (*Record, error) {
	targets, err := planTargets(e, browsersFor(e), opts)
	if err != nil {
		return nil, err
	}
	hostPath, err := validateHostPath(opts.HostPath)
	if err != nil {
		return nil, err
	}
	ids := opts.ExtensionIDs
	if len(ids) == 0 {
		ids = []string{extension.ID()}
	}
	data, err := manifests.HostManifest(hostPath, ids)
	if err != nil {
		return nil, fmt.Errorf("installing: %w", err)
	}
	recordPath, err := paths.InstallRecord()
	if err != nil {
		return nil, fmt.Errorf("installing: %w", err)
	}
	rec, err := loadRecord(recordPath)
	if err != nil {
		return nil, fmt.Errorf("installing: %w (remove the file to start afresh)", err)
	}
	if rec == nil {
		rec = &Record{}
	}

	run := &Record{Version: recordVersion}
	var errs []error
	for _, t := range targets {
		if err := writeTarget(t, hostPath, data, run); err != nil {
			errs = append(errs, fmt.Errorf("writing manifest for %s: %w", t.label(), hint(err, t.system)))
		}
	}
	rec.merge(run)
	if err := saveRecord(recordPath, rec); err != nil {
		errs = append(errs, err)
	}
	return run, errors.Join(errs...)
}

// writeTarget writes one manifest and its registry keys, recording each step
// in run as soon as it has happened.
func writeTarget(t target, hostPath string, data []byte, run *Record) error {
	created, err := mkdirAll(t.dir)
	for _, d := range created {
		run.addDir(d)
	}
	if err != nil {
		return err
	}
	file := filepath.Join(t.dir, manifests.FileName)
	if err := atomicfile.WriteFile(file, data, fileMode); err != nil {
		return err
	}
	run.addManifest(ManifestEntry{
		Path:        file,
		Browsers:    t.browsers,
		HostPath:    hostPath,
		System:      t.system,
		UserDataDir: t.userDataDir,
	})
	for _, key := range t.regKeys {
		parents, err := reg.SetDefault(t.regRoot, key, file)
		for _, p := range parents {
			if p != key {
				run.addKey(RegistryEntry{Root: t.regRoot, Path: p})
			}
		}
		if err != nil {
			return err
		}
		run.addKey(RegistryEntry{Root: t.regRoot, Path: key, Manifest: file})
	}
	return nil
}

// hint adds what to do about a permission error on a system install.
func hint(err error, system bool) error {
	if !system || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	if runtime.GOOS == "windows" {
		return fmt.Errorf("%w (a system-wide install must run from an Administrator prompt)", err)
	}
	return fmt.Errorf("%w (a system-wide install must run as root, e.g. with sudo)", err)
}

// validateHostPath checks that p is an absolute path to an executable file
// and returns it cleaned.
func validateHostPath(p string) (string, error) {
	if p == "" {
		return "", errors.New("installing: no host path given: pass the absolute path of browserbridge-host")
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("installing: host path %q is not absolute; browsers need the full path of browserbridge-host", p)
	}
	p = filepath.Clean(p)
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("installing: host %s: %w", p, err)
	}
	if fi.IsDir() {
		return "", fmt.Errorf("installing: host %s is a directory, not the browserbridge-host executable", p)
	}
	if !isExecutable(p, fi) {
		return "", fmt.Errorf("installing: host %s is not executable (%s)", p, notExecutableFix(p))
	}
	return p, nil
}

// resolveBrowsers turns Options.Browsers into browsers from table, in table
// order and without duplicates. It returns nil if no browser was named.
func resolveBrowsers(goos string, table []browser, names []string) ([]browser, error) {
	want := map[string]bool{}
	for _, n := range names {
		for _, k := range strings.Split(n, ",") {
			k = strings.ToLower(strings.TrimSpace(k))
			if k == "" {
				continue
			}
			if k == AllBrowsers {
				return table, nil
			}
			if findBrowser(table, k) == nil {
				return nil, fmt.Errorf("installing: %w %q; the browsers known on %s are %s, or %s",
					ErrUnknownBrowser, k, goos, strings.Join(keysOf(table), ", "), AllBrowsers)
			}
			want[k] = true
		}
	}
	var out []browser
	for _, b := range table {
		if want[b.Key] {
			out = append(out, b)
		}
	}
	return out, nil
}

// planTargets decides which manifest files to write. Browsers sharing a
// directory share one target; a registry key shared by several browsers
// points at the manifest of the first of them in table order.
func planTargets(e env, table []browser, opts Options) ([]target, error) {
	selected, err := resolveBrowsers(e.goos, table, opts.Browsers)
	if err != nil {
		return nil, err
	}
	if opts.UserDataDir != "" {
		if e.goos == "windows" {
			return nil, errors.New("installing: --user-data-dir is not supported on Windows, where browsers find native hosts only through the registry")
		}
		if opts.System {
			return nil, errors.New("installing: a --user-data-dir install is per profile and cannot also be system-wide")
		}
		if len(selected) > 1 {
			return nil, fmt.Errorf("installing: --user-data-dir belongs to one browser, but %d were named (%s)",
				len(selected), strings.Join(keysOf(selected), ", "))
		}
		udd, err := filepath.Abs(opts.UserDataDir)
		if err != nil {
			return nil, fmt.Errorf("installing: user data dir: %w", err)
		}
		t := target{dir: filepath.Join(udd, hostsDirName), userDataDir: udd}
		if len(selected) == 1 {
			t.browsers, t.names = []string{selected[0].Key}, []string{selected[0].Name}
		}
		return []target{t}, nil
	}
	if selected == nil {
		for _, k := range detect(e, table) {
			selected = append(selected, *findBrowser(table, k))
		}
	}
	if len(selected) == 0 {
		return nil, fmt.Errorf("installing: %w: none of %s is set up for this user; install one and run it once, or pass --browser with one of those keys (or --browser %s) to install anyway",
			ErrNoBrowser, strings.Join(keysOf(table), ", "), AllBrowsers)
	}

	var targets []target
	byDir := map[string]int{}
	claimed := map[string]bool{}
	for _, b := range selected {
		dirs, root := b.UserDirs, rootUser
		if opts.System {
			dirs, root = b.SystemDirs, rootMachine
		}
		for i, dir := range dirs {
			if j, ok := byDir[dir]; ok {
				targets[j].browsers = append(targets[j].browsers, b.Key)
				targets[j].names = append(targets[j].names, b.Name)
				continue
			}
			t := target{browsers: []string{b.Key}, names: []string{b.Name}, dir: dir, system: opts.System}
			if e.goos == "windows" && i == 0 {
				t.regRoot = root
				for _, k := range b.RegistryKeys {
					if !claimed[k] {
						claimed[k] = true
						t.regKeys = append(t.regKeys, k)
					}
				}
			}
			byDir[dir] = len(targets)
			targets = append(targets, t)
		}
	}
	return targets, nil
}

// Uninstall is UninstallWith with no extra steps.
func Uninstall() (removed []string, err error) { return UninstallWith(UninstallOptions{}) }

// UninstallOptions adds the CLI's steps to UninstallWith. The zero value
// adds none.
type UninstallOptions struct {
	// Stop, if set, runs once the hosts are unregistered, so that browsers
	// start no new ones, and before any installed file is removed. It gets
	// the record (its manifests name the installed host) and should stop
	// what runs from the installed files, and remove what those wrote
	// outside the record, so that the folders Install created empty out.
	// Its error is reported and the uninstall goes on.
	Stop func(rec *Record) error
}

// UninstallWith removes what the record lists: each manifest file that is
// still ours (its "name" is com.browserbridge.host), each registry key, then
// (after opts.Stop) each file InstallFiles copied, each link that still
// points at the installed program, the record itself, and each
// directory Install created that is now empty. It returns what it removed.
// Without a record there is nothing of the record's to do and no error. If
// something cannot be removed, the rest still is, and the record keeps the
// leftovers so that a second run (say, with sudo) can finish.
func UninstallWith(opts UninstallOptions) (removed []string, err error) {
	recordPath, err := paths.InstallRecord()
	if err != nil {
		return nil, fmt.Errorf("uninstalling: %w", err)
	}
	rec, err := loadRecord(recordPath)
	if err != nil {
		return nil, fmt.Errorf("uninstalling: %w", err)
	}
	if rec == nil {
		rec = &Record{Version: recordVersion}
	}
	left := &Record{Version: recordVersion}
	var errs []error

	for _, m := range rec.Manifests {
		ok, err := removeManifest(m.Path)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("removing manifest %s: %w", m.Path, hint(err, m.System)))
			left.addManifest(m)
		case ok:
			removed = append(removed, m.Path)
		}
	}

	// Host keys first, then the parents Install created, innermost first.
	keys := slices.Clone(rec.RegistryKeys)
	slices.SortStableFunc(keys, func(a, b RegistryEntry) int {
		if (a.Manifest == "") != (b.Manifest == "") {
			if a.Manifest != "" {
				return -1
			}
			return 1
		}
		return len(b.Path) - len(a.Path)
	})
	for _, k := range keys {
		var ok bool
		var err error
		if k.Manifest != "" {
			ok, err = reg.Delete(k.Root, k.Path)
		} else {
			ok, err = reg.DeleteIfEmpty(k.Root, k.Path)
		}
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("removing registry key %s: %w", k, err))
			left.addKey(k)
		case ok:
			removed = append(removed, k.String())
		}
	}

	if opts.Stop != nil {
		if err := opts.Stop(rec); err != nil {
			errs = append(errs, err)
		}
	}

	for _, l := range rec.Links {
		ok, err := removeLink(l)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("removing link %s: %w", l.Path, err))
			left.addLink(l)
		case ok:
			removed = append(removed, l.Path)
		}
	}
	for _, f := range rec.Files {
		ok, err := removeFile(f)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("removing %s: %w", f, err))
			left.addFile(f)
		case ok:
			removed = append(removed, f)
		}
	}

	if len(errs) == 0 {
		if err := os.Remove(recordPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing install record: %w", err))
		} else if err == nil {
			removed = append(removed, recordPath)
		}
	}

	// Innermost directories first, so that parents empty out in turn.
	dirs := slices.Clone(rec.Dirs)
	slices.SortStableFunc(dirs, func(a, b string) int { return len(b) - len(a) })
	for _, d := range dirs {
		empty, err := dirIsEmpty(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil && empty {
			err = os.Remove(d)
			if err == nil {
				removed = append(removed, d)
				continue
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("removing directory %s: %w", d, err))
		}
		// Not empty: someone else put files there, so leave it. Keep it in
		// a surviving record in case a retry empties it.
		left.addDir(d)
	}

	if len(errs) > 0 && !left.empty() {
		if err := saveRecord(recordPath, left); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("uninstalling: %w", err)
	}
	return removed, nil
}

// removeManifest removes the manifest at path if it is ours. It reports
// false, without error, if the file is gone or belongs to someone else.
func removeManifest(path string) (bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	m, err := manifests.Parse(data)
	if err != nil || m.Name != manifests.HostName {
		return false, nil
	}
	if err := os.Remove(path); err != nil {
		return false, err
	}
	return true, nil
}
