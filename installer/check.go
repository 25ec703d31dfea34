package installer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/browserbridge/browserbridge/bridge/paths"
	"github.com/browserbridge/browserbridge/extension"
	"github.com/browserbridge/browserbridge/manifests"
)

// ManifestStatus is what Check found at one manifest location.
type ManifestStatus struct {
	// Browser is the browser key, e.g. "chromium". It is empty for a
	// --user-data-dir manifest installed without naming a browser, and for
	// a problem not tied to one browser.
	Browser string
	// ManifestPath is the manifest file checked, or where it should be.
	ManifestPath string
	// Installed is true if the manifest file exists and can be read.
	Installed bool
	// HostPath is the host executable the manifest names.
	HostPath string
	// HostExecutable is true if HostPath is an absolute path to an
	// executable file.
	HostExecutable bool
	// OriginAllowed is true if the manifest's allowed_origins holds the
	// extension's origin.
	OriginAllowed bool
	// Problem is a sentence saying what is wrong, the most basic problem
	// first; empty when the manifest is fine.
	Problem string
	// Fix is a sentence saying what to do about Problem.
	Fix string
}

// OK reports whether Check found nothing wrong.
func (s ManifestStatus) OK() bool { return s.Problem == "" }

// Check inspects the manifest of every detected browser and every manifest
// in the install record: that it exists and parses, names this host, points
// at an absolute path to an executable, and allows extensionID's origin.
// An empty extensionID means extension.ID(). Check never fails; whatever
// goes wrong is reported as a ManifestStatus with a Problem and a Fix.
func Check(extensionID string) []ManifestStatus {
	if extensionID == "" {
		extensionID = extension.ID()
	}
	e, err := currentEnv()
	if err != nil {
		return []ManifestStatus{{
			Problem: fmt.Sprintf("cannot tell where browsers keep native hosts: %v", err),
			Fix:     "run browserbridge from a normal login session, where HOME (LOCALAPPDATA on Windows) is set",
		}}
	}
	return check(e, extensionID)
}

// location is one place a browser reads a manifest from.
type location struct {
	browser     string // browser key, or ""
	name        string // how to call the browser in a sentence
	path        string
	system      bool
	userDataDir string
	regKey      string // Windows: the key that names path, or that should
	regMissing  bool   // Windows: no registry key names a manifest
}

func check(e env, extensionID string) []ManifestStatus {
	table := browsersFor(e)
	origin := manifests.Origin(extensionID)
	var out []ManifestStatus
	seen := map[string]bool{}
	for _, key := range detect(e, table) {
		loc := locate(e, *findBrowser(table, key))
		if !seen[loc.path] {
			seen[loc.path] = true
			out = append(out, inspect(e, loc, origin))
		}
	}

	recordPath, err := paths.InstallRecord()
	var rec *Record
	if err == nil {
		rec, err = loadRecord(recordPath)
	}
	if err != nil {
		out = append(out, ManifestStatus{
			Problem: fmt.Sprintf("the install record is unreadable: %v", err),
			Fix:     fmt.Sprintf("delete %s, then run: browserbridge install", recordPath),
		})
	}
	if rec != nil {
		for _, m := range rec.Manifests {
			if seen[m.Path] {
				continue
			}
			seen[m.Path] = true
			loc := location{path: m.Path, system: m.System, userDataDir: m.UserDataDir}
			var names []string
			for _, k := range m.Browsers {
				if b := findBrowser(table, k); b != nil {
					names = append(names, b.Name)
				}
			}
			if len(m.Browsers) > 0 {
				loc.browser = m.Browsers[0]
			}
			switch {
			case len(names) > 0:
				loc.name = strings.Join(names, ", ")
			case m.UserDataDir != "":
				loc.name = "the browser profile at " + m.UserDataDir
			default:
				loc.name = "your browser"
			}
			out = append(out, inspect(e, loc, origin))
		}
	}

	if len(out) == 0 {
		out = append(out, ManifestStatus{
			Problem: "no supported browser found for this user, and nothing installed",
			Fix: fmt.Sprintf("install and start one of %s, or run: browserbridge install --browser KEY",
				strings.Join(keysOf(table), ", ")),
		})
	}
	return out
}

// locate finds the manifest browser b would use: the user-level one if it
// exists, else a system-wide one, else (missing) the user-level path. On
// Windows it follows the registry, HKCU before HKLM as Chrome does.
func locate(e env, b browser) location {
	loc := location{browser: b.Key, name: b.Name}
	if e.goos == "windows" {
		for _, key := range b.RegistryKeys {
			for _, root := range []string{rootUser, rootMachine} {
				v, err := reg.GetDefault(root, key)
				if err == nil && v != "" {
					loc.path, loc.system, loc.regKey = v, root == rootMachine, root+`\`+key
					return loc
				}
			}
		}
		loc.path = filepath.Join(b.UserDirs[0], manifests.FileName)
		loc.regKey, loc.regMissing = rootUser+`\`+b.RegistryKeys[0], true
		return loc
	}
	loc.path = filepath.Join(b.UserDirs[0], manifests.FileName)
	if fileExists(loc.path) {
		return loc
	}
	for _, d := range b.SystemDirs {
		if p := filepath.Join(d, manifests.FileName); fileExists(p) {
			loc.path, loc.system = p, true
			return loc
		}
	}
	return loc
}

// fix is the command that would rewrite the manifest at loc.
func (loc location) fix(e env) string {
	var args []string
	if loc.userDataDir != "" {
		args = append(args, "--user-data-dir", quoteArg(loc.userDataDir))
	}
	if loc.system {
		args = append(args, "--system")
	}
	if loc.browser != "" {
		args = append(args, "--browser", loc.browser)
	}
	cmd := strings.TrimSpace("browserbridge install " + strings.Join(args, " "))
	switch {
	case loc.system && e.goos == "windows":
		return "from an Administrator prompt, run: " + cmd
	case loc.system:
		return "run: sudo " + cmd
	}
	return "run: " + cmd
}

// inspect checks the manifest at loc.
func inspect(e env, loc location, origin string) ManifestStatus {
	s := ManifestStatus{Browser: loc.browser, ManifestPath: loc.path}
	fix := loc.fix(e)
	data, err := os.ReadFile(loc.path)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist) && loc.regMissing:
			s.Problem = fmt.Sprintf("manifest missing for %s: registry key %s does not exist", loc.name, loc.regKey)
		case errors.Is(err, fs.ErrNotExist) && loc.regKey != "":
			s.Problem = fmt.Sprintf("manifest missing for %s at %s, which registry key %s names", loc.name, loc.path, loc.regKey)
		case errors.Is(err, fs.ErrNotExist):
			s.Problem = fmt.Sprintf("manifest missing for %s at %s", loc.name, loc.path)
		default:
			s.Problem = fmt.Sprintf("cannot read the %s manifest at %s: %v", loc.name, loc.path, err)
			fix = "check the file's permissions, or " + fix
		}
		s.Fix = fix
		return s
	}
	s.Installed = true
	m, err := manifests.Parse(data)
	if err != nil {
		s.Problem = fmt.Sprintf("the %s manifest at %s is not valid JSON (%v)", loc.name, loc.path, err)
		s.Fix = "rewrite it; " + fix
		return s
	}
	s.HostPath = m.Path

	// Record only the first problem found, but set every flag.
	report := func(problem, fix string) {
		if s.Problem == "" {
			s.Problem, s.Fix = problem, fix
		}
	}
	where := fmt.Sprintf("the %s manifest at %s", loc.name, loc.path)
	if m.Name != manifests.HostName {
		report(fmt.Sprintf("%s is named %q instead of %q, so the browser ignores it", where, m.Name, manifests.HostName), fix)
	}
	if m.Type != manifests.TypeStdio {
		report(fmt.Sprintf("%s has type %q instead of %q", where, m.Type, manifests.TypeStdio), fix)
	}
	switch fi, err := os.Stat(m.Path); {
	case m.Path == "":
		report(where+" names no host program", fix)
	case !filepath.IsAbs(m.Path):
		report(fmt.Sprintf("%s names the host %q, which is not an absolute path", where, m.Path), fix)
	case errors.Is(err, fs.ErrNotExist):
		report(fmt.Sprintf("%s points at the host %s, which does not exist", where, m.Path),
			fmt.Sprintf("put browserbridge-host back at %s, or point the manifest at the current host; %s", m.Path, fix))
	case err != nil:
		report(fmt.Sprintf("cannot inspect the host %s named by %s: %v", m.Path, where, err),
			"check that you may read "+filepath.Dir(m.Path)+", or "+fix)
	case fi.IsDir():
		report(fmt.Sprintf("%s points at %s, which is a directory, not the host program", where, m.Path), fix)
	case !isExecutable(m.Path, fi):
		report(fmt.Sprintf("%s points at the host %s, which is not executable", where, m.Path), notExecutableFix(m.Path))
	default:
		s.HostExecutable = true
	}
	if m.AllowsOrigin(origin) {
		s.OriginAllowed = true
	} else {
		report(fmt.Sprintf("%s does not allow the Browser Bridge extension (%s)", where, origin), fix)
	}
	return s
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// quoteArg puts double quotes around a command-line argument holding
// spaces, which both Unix shells and the Windows command prompt understand.
func quoteArg(s string) string {
	if strings.ContainsAny(s, " \t") {
		return `"` + s + `"`
	}
	return s
}
