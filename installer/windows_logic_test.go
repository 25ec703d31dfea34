package installer

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/paths"
	"github.com/browserbridge/browserbridge/extension"
	"github.com/browserbridge/browserbridge/manifests"
)

// fakeRegistry is an in-memory registry: full key path ("HKCU\Software\…")
// to its default value, nil for a key without one.
type fakeRegistry struct{ keys map[string]*string }

var _ winRegistry = (*fakeRegistry)(nil)

func newFakeRegistry(existing ...string) *fakeRegistry {
	f := &fakeRegistry{keys: map[string]*string{}}
	for _, k := range append([]string{`HKCU\Software`, `HKLM\Software`}, existing...) {
		// A key's parents exist too.
		parts := strings.Split(k, `\`)
		for i := 2; i <= len(parts); i++ {
			f.keys[strings.Join(parts[:i], `\`)] = nil
		}
	}
	return f
}

func (f *fakeRegistry) SetDefault(root, path, value string) ([]string, error) {
	var created []string
	parts := strings.Split(path, `\`)
	for i := range parts {
		p := strings.Join(parts[:i+1], `\`)
		if _, ok := f.keys[root+`\`+p]; !ok {
			f.keys[root+`\`+p] = nil
			created = append(created, p)
		}
	}
	f.keys[root+`\`+path] = &value
	return created, nil
}

func (f *fakeRegistry) GetDefault(root, path string) (string, error) {
	v, ok := f.keys[root+`\`+path]
	if !ok || v == nil {
		return "", errRegistryNotFound
	}
	return *v, nil
}

func (f *fakeRegistry) hasSubkeys(full string) bool {
	for k := range f.keys {
		if strings.HasPrefix(k, full+`\`) {
			return true
		}
	}
	return false
}

func (f *fakeRegistry) Delete(root, path string) (bool, error) {
	full := root + `\` + path
	if _, ok := f.keys[full]; !ok {
		return false, nil
	}
	if f.hasSubkeys(full) {
		return false, fmt.Errorf("%s has subkeys", full)
	}
	delete(f.keys, full)
	return true, nil
}

func (f *fakeRegistry) DeleteIfEmpty(root, path string) (bool, error) {
	full := root + `\` + path
	if v, ok := f.keys[full]; !ok || v != nil || f.hasSubkeys(full) {
		return false, nil
	}
	return f.Delete(root, path)
}

func (f *fakeRegistry) snapshot() map[string]string {
	m := map[string]string{}
	for k, v := range f.keys {
		m[k] = ""
		if v != nil {
			m[k] = *v
		}
	}
	return m
}

// windowsSandbox runs the Windows code paths against a fake registry and
// %LOCALAPPDATA% and %ProgramData% in temporary directories. Off Windows the
// resulting file names hold backslashes, which Unix file systems allow.
func windowsSandbox(t *testing.T, existingKeys ...string) (env, *fakeRegistry, string) {
	t.Helper()
	tmp := t.TempDir()
	t.Setenv(paths.EnvHome, filepath.Join(tmp, "bbhome"))
	e := env{goos: "windows", localAppData: filepath.Join(tmp, "Local"), programData: filepath.Join(tmp, "ProgramData")}
	// Everything must land under tmp, on whatever OS runs the test.
	for _, b := range browsersFor(e) {
		for _, p := range append([]string{b.DataDir}, append(b.UserDirs, b.SystemDirs...)...) {
			if !filepath.IsAbs(p) || !strings.HasPrefix(p, tmp) {
				t.Fatalf("%s: path %q is not inside %s", b.Key, p, tmp)
			}
		}
	}
	f := newFakeRegistry(existingKeys...)
	old := reg
	reg = f
	t.Cleanup(func() { reg = old })
	host := filepath.Join(t.TempDir(), "browserbridge-host.exe")
	if err := os.WriteFile(host, []byte("MZ"), 0o755); err != nil {
		t.Fatal(err)
	}
	return e, f, host
}

func TestWindowsInstallUninstall(t *testing.T) {
	const other = `HKCU\Software\Chromium\NativeMessagingHosts\org.example.other`
	e, f, host := windowsSandbox(t, `HKCU\Software\Google\Chrome`, `HKCU\Software\Chromium\NativeMessagingHosts`, other)
	f.keys[other] = new(string)
	*f.keys[other] = `C:\other.json`
	// Chrome has been run; the others are installed on request.
	chromeData := findBrowser(browsersFor(e), "chrome").DataDir
	if err := os.MkdirAll(chromeData, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(chromeData, "Local State"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	regBefore := f.snapshot()
	filesBefore := snapshot(t, filepath.Dir(e.localAppData))

	opts := Options{Browsers: []string{"vivaldi", "brave", "chrome", "chromium"}, HostPath: host}
	if _, err := install(e, opts); err != nil {
		t.Fatalf("install: %v", err)
	}
	manifestOf := func(key string) string {
		return filepath.Join(e.join(e.localAppData, "BrowserBridge", "NativeMessagingHosts", key), manifests.FileName)
	}
	wantKeys := map[string]string{
		`HKCU\Software\Google\Chrome\NativeMessagingHosts\com.browserbridge.host`:               manifestOf("chrome"),
		`HKCU\Software\Chromium\NativeMessagingHosts\com.browserbridge.host`:                    manifestOf("chromium"),
		`HKCU\Software\BraveSoftware\Brave-Browser\NativeMessagingHosts\com.browserbridge.host`: manifestOf("brave"),
		`HKCU\Software\Vivaldi\NativeMessagingHosts\com.browserbridge.host`:                     manifestOf("vivaldi"),
	}
	for k, want := range wantKeys {
		got, err := f.GetDefault(k[:4], k[5:])
		if err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", k, got, err, want)
		}
		data, err := os.ReadFile(want)
		if err != nil {
			t.Fatalf("manifest for %s: %v", k, err)
		}
		m, err := manifests.Parse(data)
		if err != nil || m.Name != manifests.HostName || m.Path != host || !m.AllowsOrigin(extension.Origin()) {
			t.Errorf("manifest %s = %+v, %v", want, m, err)
		}
	}

	rec := readRecord(t)
	var created []string
	for _, k := range rec.RegistryKeys {
		if k.Manifest == "" {
			created = append(created, k.String())
		} else if wantKeys[k.String()] != k.Manifest {
			t.Errorf("record: %s = %q, want %q", k, k.Manifest, wantKeys[k.String()])
		}
	}
	wantCreated := []string{
		`HKCU\Software\Google\Chrome\NativeMessagingHosts`,
		`HKCU\Software\BraveSoftware`,
		`HKCU\Software\BraveSoftware\Brave-Browser`,
		`HKCU\Software\BraveSoftware\Brave-Browser\NativeMessagingHosts`,
		`HKCU\Software\Vivaldi`,
		`HKCU\Software\Vivaldi\NativeMessagingHosts`,
	}
	slices.Sort(created)
	slices.Sort(wantCreated)
	if !reflect.DeepEqual(created, wantCreated) {
		t.Errorf("recorded created keys %q, want %q", created, wantCreated)
	}

	// Installing again changes nothing.
	regAfter := f.snapshot()
	if _, err := install(e, opts); err != nil {
		t.Fatal(err)
	}
	if again := readRecord(t); !reflect.DeepEqual(again, rec) {
		t.Errorf("record changed on reinstall:\n%+v\n%+v", rec, again)
	}
	if !reflect.DeepEqual(f.snapshot(), regAfter) {
		t.Error("registry changed on reinstall")
	}

	// Everything checks out: Chrome by detection, the rest by the record.
	statuses := check(e, extension.ID())
	if len(statuses) != 4 {
		t.Fatalf("check returned %d statuses, want 4: %+v", len(statuses), statuses)
	}
	for _, st := range statuses {
		if !st.OK() || !st.Installed || !st.HostExecutable || !st.OriginAllowed {
			t.Errorf("status %+v", st)
		}
	}

	removed, err := Uninstall()
	if err != nil {
		t.Fatalf("Uninstall: %v", err)
	}
	for k := range wantKeys {
		if !slices.Contains(removed, k) {
			t.Errorf("Uninstall did not report removing %s", k)
		}
	}
	if got := f.snapshot(); !reflect.DeepEqual(got, regBefore) {
		t.Errorf("registry after uninstall =\n%q\nwant\n%q", got, regBefore)
	}
	if got := snapshot(t, filepath.Dir(e.localAppData)); !reflect.DeepEqual(got, filesBefore) {
		t.Errorf("files after uninstall =\n%v\nwant\n%v", got, filesBefore)
	}
}

func TestWindowsSystemInstallAndCheck(t *testing.T) {
	e, f, host := windowsSandbox(t)
	if _, err := install(e, Options{Browsers: []string{"edge"}, System: true, HostPath: host}); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(e.join(e.programData, "BrowserBridge", "NativeMessagingHosts", "edge"), manifests.FileName)
	if got, err := f.GetDefault("HKLM", `Software\Microsoft\Edge\NativeMessagingHosts\com.browserbridge.host`); err != nil || got != want {
		t.Errorf("HKLM key = %q, %v; want %q", got, err, want)
	}
	if err := os.Remove(host); err != nil {
		t.Fatal(err)
	}
	st := check(e, extension.ID())
	if len(st) != 1 || !strings.Contains(st[0].Problem, "does not exist") ||
		!strings.Contains(st[0].Fix, "from an Administrator prompt, run: browserbridge install --system --browser edge") {
		t.Errorf("check = %+v", st)
	}
}

func TestWindowsCheckMissingKey(t *testing.T) {
	e, _, _ := windowsSandbox(t)
	data := findBrowser(browsersFor(e), "chromium").DataDir
	if err := os.MkdirAll(filepath.Join(data, "Default"), 0o755); err != nil {
		t.Fatal(err)
	}
	st := check(e, extension.ID())
	if len(st) != 1 {
		t.Fatalf("check = %+v", st)
	}
	want := `manifest missing for Chromium: registry key HKCU\Software\Chromium\NativeMessagingHosts\com.browserbridge.host does not exist`
	if st[0].Problem != want || st[0].Fix != "run: browserbridge install --browser chromium" || st[0].Installed {
		t.Errorf("status = %+v", st[0])
	}
}
