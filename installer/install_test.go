//go:build !windows

// These tests install for real, into temporary home and system directories.
// They do not run on Windows, where Install writes the user's registry.

package installer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/paths"
	"github.com/browserbridge/browserbridge/extension"
	"github.com/browserbridge/browserbridge/manifests"
)

// sandbox is a temporary home, system root and PATH for one test.
type sandbox struct {
	home    string
	sysRoot string
	bin     string // the only directory on PATH
	host    string // an executable browserbridge-host outside home
}

func newSandbox(t *testing.T) *sandbox {
	t.Helper()
	s := &sandbox{home: t.TempDir(), sysRoot: t.TempDir(), bin: t.TempDir()}
	t.Setenv("HOME", s.home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("CHROME_CONFIG_HOME", "")
	t.Setenv(paths.EnvHome, s.home)
	t.Setenv("PATH", s.bin)
	old := sysRootOverride
	sysRootOverride = s.sysRoot
	t.Cleanup(func() { sysRootOverride = old })
	s.host = filepath.Join(t.TempDir(), "browserbridge-host")
	writeFile(t, s.host, "#!/bin/sh\n", 0o755)
	return s
}

// wantUserDirs are the user-level manifest directories per browser, relative
// to HOME, written out independently of the browser table.
func wantUserDirs(t *testing.T) map[string][]string {
	switch runtime.GOOS {
	case "linux":
		c := ".config/"
		return map[string][]string{
			"chrome":      {c + "google-chrome/NativeMessagingHosts"},
			"chrome-beta": {c + "google-chrome-beta/NativeMessagingHosts"},
			"chrome-dev":  {c + "google-chrome-unstable/NativeMessagingHosts"},
			"chromium":    {c + "chromium/NativeMessagingHosts"},
			"edge":        {c + "microsoft-edge/NativeMessagingHosts"},
			"edge-beta":   {c + "microsoft-edge-beta/NativeMessagingHosts"},
			"edge-dev":    {c + "microsoft-edge-dev/NativeMessagingHosts"},
			"brave":       {c + "BraveSoftware/Brave-Browser/NativeMessagingHosts"},
			"vivaldi":     {c + "vivaldi/NativeMessagingHosts"},
		}
	case "darwin":
		a := "Library/Application Support/"
		return map[string][]string{
			"chrome":        {a + "Google/Chrome/NativeMessagingHosts"},
			"chrome-beta":   {a + "Google/Chrome Beta/NativeMessagingHosts"},
			"chrome-dev":    {a + "Google/Chrome Dev/NativeMessagingHosts"},
			"chrome-canary": {a + "Google/Chrome Canary/NativeMessagingHosts"},
			"chromium":      {a + "Chromium/NativeMessagingHosts"},
			"edge":          {a + "Microsoft Edge/NativeMessagingHosts"},
			"edge-beta":     {a + "Microsoft Edge Beta/NativeMessagingHosts"},
			"edge-dev":      {a + "Microsoft Edge Dev/NativeMessagingHosts"},
			"brave":         {a + "BraveSoftware/Brave-Browser/NativeMessagingHosts", a + "Google/Chrome/NativeMessagingHosts"},
			"vivaldi":       {a + "Vivaldi/NativeMessagingHosts"},
		}
	}
	t.Skipf("no expected paths for %s", runtime.GOOS)
	return nil
}

// checkManifest asserts that path holds our manifest naming host.
func checkManifest(t *testing.T, path, host string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("manifest not written: %v", err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("%s has mode %v, want 0644", path, fi.Mode().Perm())
	}
	if dfi, err := os.Stat(filepath.Dir(path)); err != nil || dfi.Mode().Perm() != 0o755 {
		t.Errorf("directory of %s: mode %v, err %v; want 0755", path, dfi.Mode().Perm(), err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("manifest is not valid JSON: %v\n%s", err, data)
	}
	if m["name"] != manifests.HostName || m["type"] != "stdio" || m["path"] != host {
		t.Errorf("manifest name/type/path = %v/%v/%v", m["name"], m["type"], m["path"])
	}
	if d, _ := m["description"].(string); d == "" {
		t.Error("manifest has no description")
	}
	want := []any{"chrome-extension://" + extension.ID() + "/"}
	if !reflect.DeepEqual(m["allowed_origins"], want) {
		t.Errorf("allowed_origins = %v, want %v", m["allowed_origins"], want)
	}
}

func TestInstallEachBrowser(t *testing.T) {
	want := wantUserDirs(t)
	for _, key := range Browsers() {
		t.Run(key, func(t *testing.T) {
			s := newSandbox(t)
			dirs, ok := want[key]
			if !ok {
				t.Fatalf("test has no expected path for %s", key)
			}
			rec, err := Install(Options{Browsers: []string{key}, HostPath: s.host})
			if err != nil {
				t.Fatalf("Install: %v", err)
			}
			var wantPaths []string
			for _, d := range dirs {
				p := filepath.Join(s.home, d, manifests.FileName)
				wantPaths = append(wantPaths, p)
				checkManifest(t, p, s.host)
			}
			if got := recordPaths(rec); !reflect.DeepEqual(got, wantPaths) {
				t.Errorf("returned record lists %q, want %q", got, wantPaths)
			}
			if got := recordPaths(readRecord(t)); !reflect.DeepEqual(got, wantPaths) {
				t.Errorf("record file lists %q, want %q", got, wantPaths)
			}
		})
	}
	delete(want, "chrome-canary") // absent on Linux, present on macOS
	for key := range want {
		if !slices.Contains(Browsers(), key) {
			t.Errorf("Browsers() lacks %s", key)
		}
	}
}

func TestInstallHonoursConfigHome(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("XDG_CONFIG_HOME and CHROME_CONFIG_HOME apply to Linux only")
	}
	tests := []struct {
		name, xdg, chrome string
		want              string // relative to the temp dir
	}{
		{"XDG_CONFIG_HOME", "xdg", "", "xdg/chromium/NativeMessagingHosts"},
		{"CHROME_CONFIG_HOME wins", "xdg", "cch", "cch/chromium/NativeMessagingHosts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			base := t.TempDir()
			t.Setenv("XDG_CONFIG_HOME", filepath.Join(base, tc.xdg))
			if tc.chrome != "" {
				t.Setenv("CHROME_CONFIG_HOME", filepath.Join(base, tc.chrome))
			}
			if _, err := Install(Options{Browsers: []string{"chromium"}, HostPath: s.host}); err != nil {
				t.Fatal(err)
			}
			checkManifest(t, filepath.Join(base, tc.want, manifests.FileName), s.host)
		})
	}
}

func TestInstallSystem(t *testing.T) {
	s := newSandbox(t)
	if _, err := Install(Options{Browsers: []string{"chrome", "brave", "chromium"}, System: true, HostPath: s.host}); err != nil {
		t.Fatalf("Install: %v", err)
	}
	var chromeSys, chromiumSys string
	switch runtime.GOOS {
	case "linux":
		chromeSys, chromiumSys = "etc/opt/chrome/native-messaging-hosts", "etc/chromium/native-messaging-hosts"
	case "darwin":
		chromeSys, chromiumSys = "Library/Google/Chrome/NativeMessagingHosts", "Library/Application Support/Chromium/NativeMessagingHosts"
	}
	for _, d := range []string{chromeSys, chromiumSys} {
		checkManifest(t, filepath.Join(s.sysRoot, d, manifests.FileName), s.host)
	}
	rec := readRecord(t)
	if len(rec.Manifests) != 2 {
		t.Fatalf("record lists %d manifests, want 2 (Chrome and Brave share one): %+v", len(rec.Manifests), rec.Manifests)
	}
	if m := rec.Manifests[0]; !m.System || !reflect.DeepEqual(m.Browsers, []string{"chrome", "brave"}) {
		t.Errorf("first manifest entry = %+v", m)
	}
	// Nothing user-level was written.
	if _, err := os.Stat(filepath.Join(s.home, ".config")); err == nil {
		t.Error("system install wrote under HOME/.config")
	}
	if _, err := Uninstall(); err != nil {
		t.Fatalf("Uninstall: %v", err)
	}
	if entries, _ := os.ReadDir(s.sysRoot); len(entries) != 0 {
		t.Errorf("system root not empty after uninstall: %v", entries)
	}
}

func TestInstallUserDataDir(t *testing.T) {
	tests := []struct {
		name     string
		browsers []string
		wantErr  string
	}{
		{"no browser named", nil, ""},
		{"one browser", []string{"chromium"}, ""},
		{"two browsers", []string{"chromium", "chrome"}, "one browser"},
		{"all", []string{"all"}, "one browser"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			udd := filepath.Join(t.TempDir(), "profile dir")
			rec, err := Install(Options{Browsers: tc.browsers, UserDataDir: udd, HostPath: s.host})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Install error = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Install: %v", err)
			}
			p := filepath.Join(udd, "NativeMessagingHosts", "com.browserbridge.host.json")
			checkManifest(t, p, s.host)
			if len(rec.Manifests) != 1 || rec.Manifests[0].Path != p || rec.Manifests[0].UserDataDir != udd {
				t.Errorf("record = %+v", rec.Manifests)
			}
			// Nothing went to the browser's default location.
			if _, err := os.Stat(filepath.Join(s.home, ".config")); err == nil {
				t.Error("--user-data-dir install also wrote under HOME/.config")
			}
			if _, err := Uninstall(); err != nil {
				t.Fatal(err)
			}
			if entries, _ := os.ReadDir(udd); len(entries) != 0 {
				t.Errorf("user data dir not empty after uninstall: %v", entries)
			}
		})
	}
}

func TestUninstallLeavesNothingBehind(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		setup func(t *testing.T, s *sandbox)
	}{
		{"every browser", Options{Browsers: []string{"all"}}, nil},
		{"every browser, system-wide", Options{Browsers: []string{"all"}, System: true}, nil},
		{"detected browser", Options{}, func(t *testing.T, s *sandbox) {
			writeFile(t, filepath.Join(s.home, ".config", "chromium", "Local State"), "{}", 0o600)
			writeFile(t, filepath.Join(s.home, "Library", "Application Support", "Chromium", "Local State"), "{}", 0o600)
		}},
		{"existing config dir", Options{Browsers: []string{"edge"}}, func(t *testing.T, s *sandbox) {
			writeFile(t, filepath.Join(s.home, "config", "config.json"), "{}", 0o600)
			if err := os.MkdirAll(filepath.Join(s.home, ".config", "microsoft-edge", "NativeMessagingHosts"), 0o700); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			if tc.setup != nil {
				tc.setup(t, s)
			}
			before := snapshot(t, s.home, s.sysRoot)
			tc.opts.HostPath = s.host
			if _, err := Install(tc.opts); err != nil {
				t.Fatalf("Install: %v", err)
			}
			if reflect.DeepEqual(snapshot(t, s.home, s.sysRoot), before) {
				t.Fatal("Install changed nothing")
			}
			removed, err := Uninstall()
			if err != nil {
				t.Fatalf("Uninstall: %v", err)
			}
			recordPath, _ := paths.InstallRecord()
			if !slices.Contains(removed, recordPath) {
				t.Errorf("Uninstall did not report removing the record; removed %q", removed)
			}
			after := snapshot(t, s.home, s.sysRoot)
			for p := range after {
				if _, ok := before[p]; !ok {
					t.Errorf("left behind: %s", p)
				}
			}
			for p, mode := range before {
				if got, ok := after[p]; !ok || got != mode {
					t.Errorf("%s was there before install (mode %v), now mode %v, present %v", p, mode, got, ok)
				}
			}
		})
	}
}

func TestInstallIsIdempotent(t *testing.T) {
	s := newSandbox(t)
	opts := Options{Browsers: []string{"chromium", "brave", "chrome"}, HostPath: s.host}
	if _, err := Install(opts); err != nil {
		t.Fatal(err)
	}
	first := readRecord(t)
	firstFiles := snapshot(t, s.home)
	contents := map[string]string{}
	for _, m := range first.Manifests {
		data, _ := os.ReadFile(m.Path)
		contents[m.Path] = string(data)
	}

	// Second run, with the browsers in another order and one repeated.
	opts.Browsers = []string{"chrome,brave", "chromium", "chrome"}
	if _, err := Install(opts); err != nil {
		t.Fatal(err)
	}
	second := readRecord(t)
	if !reflect.DeepEqual(first, second) {
		t.Errorf("record changed on reinstall:\n%+v\n%+v", first, second)
	}
	if got := snapshot(t, s.home); !reflect.DeepEqual(got, firstFiles) {
		t.Errorf("files changed on reinstall:\n%v\n%v", firstFiles, got)
	}
	for p, c := range contents {
		if data, _ := os.ReadFile(p); string(data) != c {
			t.Errorf("%s changed on reinstall", p)
		}
	}
	seen := map[string]bool{}
	for _, m := range second.Manifests {
		if seen[m.Path] {
			t.Errorf("record lists %s twice", m.Path)
		}
		seen[m.Path] = true
	}
	if len(slices.Compact(slices.Sorted(slices.Values(second.Dirs)))) != len(second.Dirs) {
		t.Errorf("record lists a directory twice: %q", second.Dirs)
	}

	// A later install for another browser merges into the record.
	if _, err := Install(Options{Browsers: []string{"vivaldi"}, HostPath: s.host}); err != nil {
		t.Fatal(err)
	}
	if got, want := len(readRecord(t).Manifests), len(first.Manifests)+1; got != want {
		t.Errorf("record lists %d manifests after a third install, want %d", got, want)
	}
}

func TestInstallRejectsOptions(t *testing.T) {
	s := newSandbox(t)
	plain := filepath.Join(t.TempDir(), "not-executable")
	writeFile(t, plain, "x", 0o644)
	dir := t.TempDir()
	tests := []struct {
		name    string
		opts    Options
		wantErr string
		wantIs  error
	}{
		{"unknown browser", Options{Browsers: []string{"firefox"}, HostPath: s.host}, `"firefox"`, ErrUnknownBrowser},
		{"unknown among known", Options{Browsers: []string{"chrome", "netscape"}, HostPath: s.host}, "chromium, edge", ErrUnknownBrowser},
		{"no host path", Options{Browsers: []string{"chrome"}}, "no host path", nil},
		{"relative host path", Options{Browsers: []string{"chrome"}, HostPath: "bin/browserbridge-host"}, "not absolute", nil},
		{"missing host", Options{Browsers: []string{"chrome"}, HostPath: filepath.Join(dir, "nope")}, "no such file", nil},
		{"host not executable", Options{Browsers: []string{"chrome"}, HostPath: plain}, "chmod +x", nil},
		{"host is a directory", Options{Browsers: []string{"chrome"}, HostPath: dir}, "directory", nil},
		{"bad extension id", Options{Browsers: []string{"chrome"}, HostPath: s.host, ExtensionIDs: []string{"nope"}}, "extension id", nil},
		{"nothing detected", Options{HostPath: s.host}, "--browser", ErrNoBrowser},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, s.home, s.sysRoot)
			_, err := Install(tc.opts)
			if err == nil {
				t.Fatal("Install succeeded")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not mention %q", err, tc.wantErr)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error %q is not %v", err, tc.wantIs)
			}
			if !reflect.DeepEqual(snapshot(t, s.home, s.sysRoot), before) {
				t.Error("a refused install wrote files")
			}
		})
	}
}

func TestUnknownBrowserListsValidKeys(t *testing.T) {
	s := newSandbox(t)
	_, err := Install(Options{Browsers: []string{"firefox"}, HostPath: s.host})
	if err == nil {
		t.Fatal("Install succeeded")
	}
	for _, k := range append(Browsers(), "all") {
		if !strings.Contains(err.Error(), k) {
			t.Errorf("error %q does not list %s", err, k)
		}
	}
}

func TestUninstall(t *testing.T) {
	t.Run("no record", func(t *testing.T) {
		newSandbox(t)
		removed, err := Uninstall()
		if err != nil || len(removed) != 0 {
			t.Fatalf("Uninstall = %q, %v; want nothing, nil", removed, err)
		}
	})
	t.Run("foreign manifest kept", func(t *testing.T) {
		s := newSandbox(t)
		rec, err := Install(Options{Browsers: []string{"chromium"}, HostPath: s.host})
		if err != nil {
			t.Fatal(err)
		}
		p := rec.Manifests[0].Path
		writeFile(t, p, `{"name":"org.example.other"}`, 0o644)
		removed, err := Uninstall()
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(removed, p) {
			t.Errorf("Uninstall removed a manifest that is not ours")
		}
		if _, err := os.Stat(p); err != nil {
			t.Errorf("foreign manifest gone: %v", err)
		}
	})
	t.Run("manifest already gone", func(t *testing.T) {
		s := newSandbox(t)
		before := snapshot(t, s.home)
		rec, err := Install(Options{Browsers: []string{"chromium"}, HostPath: s.host})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(rec.Manifests[0].Path); err != nil {
			t.Fatal(err)
		}
		if _, err := Uninstall(); err != nil {
			t.Fatal(err)
		}
		if got := snapshot(t, s.home); !reflect.DeepEqual(got, before) {
			t.Errorf("uninstall left %v, want %v", got, before)
		}
	})
	t.Run("twice", func(t *testing.T) {
		s := newSandbox(t)
		if _, err := Install(Options{Browsers: []string{"edge"}, HostPath: s.host}); err != nil {
			t.Fatal(err)
		}
		if _, err := Uninstall(); err != nil {
			t.Fatal(err)
		}
		removed, err := Uninstall()
		if err != nil || len(removed) != 0 {
			t.Fatalf("second Uninstall = %q, %v", removed, err)
		}
	})
}

func TestDetect(t *testing.T) {
	s := newSandbox(t)
	if got := Detect(); len(got) != 0 {
		t.Fatalf("Detect in an empty home = %q", got)
	}
	chromium := findBrowser(browsersFor(mustEnv(t)), "chromium").DataDir
	edge := findBrowser(browsersFor(mustEnv(t)), "edge").DataDir
	// A data dir holding only what Install made does not count.
	if err := os.MkdirAll(filepath.Join(edge, "NativeMessagingHosts"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(chromium, "Local State"), "{}", 0o600)
	want := []string{"chromium"}
	if runtime.GOOS == "linux" {
		writeFile(t, filepath.Join(s.bin, "vivaldi-stable"), "#!/bin/sh\n", 0o755)
		writeFile(t, filepath.Join(s.bin, "brave-browser"), "not executable", 0o644)
		want = append(want, "vivaldi")
	}
	if got := Detect(); !reflect.DeepEqual(got, want) {
		t.Errorf("Detect = %q, want %q", got, want)
	}
}

func mustEnv(t *testing.T) env {
	t.Helper()
	e, err := currentEnv()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestCheck(t *testing.T) {
	other := "abcdefghijklmnopabcdefghijklmnop"
	tests := []struct {
		name string
		// setup installs or breaks things, and returns the status's path.
		setup       func(t *testing.T, s *sandbox) string
		want        ManifestStatus // Problem and Fix are checked by substring
		wantProblem string
		wantFix     string
	}{
		{
			name:        "missing manifest",
			setup:       func(t *testing.T, s *sandbox) string { return chromiumManifest(t) },
			want:        ManifestStatus{Browser: "chromium"},
			wantProblem: "manifest missing for Chromium at ",
			wantFix:     "run: browserbridge install --browser chromium",
		},
		{
			name: "healthy",
			setup: func(t *testing.T, s *sandbox) string {
				mustInstall(t, Options{Browsers: []string{"chromium"}, HostPath: s.host})
				return chromiumManifest(t)
			},
			want: ManifestStatus{Browser: "chromium", Installed: true, HostExecutable: true, OriginAllowed: true},
		},
		{
			name: "host missing",
			setup: func(t *testing.T, s *sandbox) string {
				mustInstall(t, Options{Browsers: []string{"chromium"}, HostPath: s.host})
				if err := os.Remove(s.host); err != nil {
					t.Fatal(err)
				}
				return chromiumManifest(t)
			},
			want:        ManifestStatus{Browser: "chromium", Installed: true, OriginAllowed: true},
			wantProblem: "which does not exist",
			wantFix:     "browserbridge install --browser chromium",
		},
		{
			name: "host not executable",
			setup: func(t *testing.T, s *sandbox) string {
				mustInstall(t, Options{Browsers: []string{"chromium"}, HostPath: s.host})
				if err := os.Chmod(s.host, 0o644); err != nil {
					t.Fatal(err)
				}
				return chromiumManifest(t)
			},
			want:        ManifestStatus{Browser: "chromium", Installed: true, OriginAllowed: true},
			wantProblem: "not executable",
			wantFix:     "chmod +x",
		},
		{
			name: "origin not allowed",
			setup: func(t *testing.T, s *sandbox) string {
				mustInstall(t, Options{Browsers: []string{"chromium"}, HostPath: s.host, ExtensionIDs: []string{other}})
				return chromiumManifest(t)
			},
			want:        ManifestStatus{Browser: "chromium", Installed: true, HostExecutable: true},
			wantProblem: "does not allow the Browser Bridge extension (chrome-extension://" + extension.ID() + "/)",
			wantFix:     "browserbridge install --browser chromium",
		},
		{
			name: "not JSON",
			setup: func(t *testing.T, s *sandbox) string {
				writeFile(t, chromiumManifest(t), "{", 0o644)
				return chromiumManifest(t)
			},
			want:        ManifestStatus{Browser: "chromium", Installed: true},
			wantProblem: "not valid JSON",
			wantFix:     "browserbridge install --browser chromium",
		},
		{
			name: "relative host path",
			setup: func(t *testing.T, s *sandbox) string {
				writeFile(t, chromiumManifest(t), `{"name":"com.browserbridge.host","type":"stdio","path":"host","allowed_origins":["`+extension.Origin()+`"]}`, 0o644)
				return chromiumManifest(t)
			},
			want:        ManifestStatus{Browser: "chromium", Installed: true, OriginAllowed: true},
			wantProblem: "not an absolute path",
			wantFix:     "browserbridge install --browser chromium",
		},
		{
			name: "system manifest only",
			setup: func(t *testing.T, s *sandbox) string {
				rec := mustInstall(t, Options{Browsers: []string{"chromium"}, HostPath: s.host, System: true})
				if err := os.Remove(s.host); err != nil {
					t.Fatal(err)
				}
				return rec.Manifests[0].Path
			},
			want:        ManifestStatus{Browser: "chromium", Installed: true, OriginAllowed: true},
			wantProblem: "does not exist",
			wantFix:     "sudo browserbridge install --system --browser chromium",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			// Chromium has been run once; nothing else is installed.
			writeFile(t, filepath.Join(findBrowser(browsersFor(mustEnv(t)), "chromium").DataDir, "Local State"), "{}", 0o600)
			path := tc.setup(t, s)

			got := Check("")
			if len(got) != 1 {
				t.Fatalf("Check returned %d statuses, want 1: %+v", len(got), got)
			}
			st := got[0]
			want := tc.want
			want.ManifestPath = path
			if want.Installed {
				want.HostPath = s.host
				if tc.name == "relative host path" {
					want.HostPath = "host"
				}
				if tc.name == "not JSON" {
					want.HostPath = ""
				}
			}
			want.Problem, want.Fix = st.Problem, st.Fix
			if st != want {
				t.Errorf("status =\n%+v\nwant\n%+v", st, want)
			}
			if tc.wantProblem == "" {
				if !st.OK() {
					t.Errorf("unexpected problem %q (fix %q)", st.Problem, st.Fix)
				}
				return
			}
			if !strings.Contains(st.Problem, tc.wantProblem) {
				t.Errorf("Problem %q does not contain %q", st.Problem, tc.wantProblem)
			}
			if !strings.Contains(st.Fix, tc.wantFix) {
				t.Errorf("Fix %q does not contain %q", st.Fix, tc.wantFix)
			}
		})
	}
}

func TestCheckRecordedOnly(t *testing.T) {
	// A --user-data-dir install is checked through the record even though
	// no browser is detected.
	s := newSandbox(t)
	udd := filepath.Join(t.TempDir(), "my profile")
	mustInstall(t, Options{UserDataDir: udd, HostPath: s.host})
	if err := os.Remove(s.host); err != nil {
		t.Fatal(err)
	}
	got := Check("")
	if len(got) != 1 {
		t.Fatalf("Check = %+v, want one status", got)
	}
	if !strings.Contains(got[0].Problem, "the browser profile at "+udd) {
		t.Errorf("Problem = %q", got[0].Problem)
	}
	if want := `browserbridge install --user-data-dir "` + udd + `"`; !strings.Contains(got[0].Fix, want) {
		t.Errorf("Fix = %q, want it to contain %q", got[0].Fix, want)
	}
}

func TestCheckNothingFound(t *testing.T) {
	newSandbox(t)
	got := Check("")
	if len(got) != 1 || got[0].OK() || !strings.Contains(got[0].Fix, "--browser") {
		t.Errorf("Check with no browser = %+v", got)
	}
}

// chromiumManifest is where Chromium's user-level manifest goes.
func chromiumManifest(t *testing.T) string {
	t.Helper()
	return filepath.Join(findBrowser(browsersFor(mustEnv(t)), "chromium").UserDirs[0], manifests.FileName)
}

func mustInstall(t *testing.T, opts Options) *Record {
	t.Helper()
	rec, err := Install(opts)
	if err != nil {
		t.Fatalf("Install: %v", err)
	}
	return rec
}
