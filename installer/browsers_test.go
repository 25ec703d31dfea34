package installer

import (
	"reflect"
	"slices"
	"testing"
)

// Fixed environments for each OS, so that every OS's table is checked on
// whatever OS runs the tests.
var (
	linuxEnv   = env{goos: "linux", home: "/home/u", configHome: "/home/u/.config"}
	darwinEnv  = env{goos: "darwin", home: "/Users/u"}
	windowsEnv = env{goos: "windows", localAppData: `C:\Users\u\AppData\Local`, programData: `C:\ProgramData`}
)

func TestBrowserTables(t *testing.T) {
	const (
		lc  = "/home/u/.config/"
		mas = "/Users/u/Library/Application Support/"
		lad = `C:\Users\u\AppData\Local\`
		nmh = "/NativeMessagingHosts"
		// Windows manifests live in our own directory, one per browser.
		winUser = lad + `BrowserBridge\NativeMessagingHosts\`
		winSys  = `C:\ProgramData\BrowserBridge\NativeMessagingHosts\`
		regHost = `\NativeMessagingHosts\com.browserbridge.host`
	)
	tests := []struct {
		name string
		e    env
		key  string
		want browser
	}{
		// Linux.
		{"linux/chrome", linuxEnv, "chrome", browser{
			UserDirs: []string{lc + "google-chrome" + nmh}, SystemDirs: []string{"/etc/opt/chrome/native-messaging-hosts"},
			DataDir: lc + "google-chrome", Executables: []string{"google-chrome", "google-chrome-stable"}}},
		{"linux/chrome-beta", linuxEnv, "chrome-beta", browser{
			UserDirs: []string{lc + "google-chrome-beta" + nmh}, SystemDirs: []string{"/etc/opt/chrome/native-messaging-hosts"},
			DataDir: lc + "google-chrome-beta", Executables: []string{"google-chrome-beta"}}},
		{"linux/chrome-dev", linuxEnv, "chrome-dev", browser{
			UserDirs: []string{lc + "google-chrome-unstable" + nmh}, SystemDirs: []string{"/etc/opt/chrome/native-messaging-hosts"},
			DataDir: lc + "google-chrome-unstable", Executables: []string{"google-chrome-unstable"}}},
		{"linux/chromium", linuxEnv, "chromium", browser{
			UserDirs: []string{lc + "chromium" + nmh}, SystemDirs: []string{"/etc/chromium/native-messaging-hosts"},
			DataDir: lc + "chromium", Executables: []string{"chromium", "chromium-browser"}}},
		{"linux/edge", linuxEnv, "edge", browser{
			UserDirs: []string{lc + "microsoft-edge" + nmh}, SystemDirs: []string{"/etc/opt/edge/native-messaging-hosts"},
			DataDir: lc + "microsoft-edge", Executables: []string{"microsoft-edge", "microsoft-edge-stable"}}},
		{"linux/edge-beta", linuxEnv, "edge-beta", browser{
			UserDirs: []string{lc + "microsoft-edge-beta" + nmh}, SystemDirs: []string{"/etc/opt/edge/native-messaging-hosts"},
			DataDir: lc + "microsoft-edge-beta", Executables: []string{"microsoft-edge-beta"}}},
		{"linux/edge-dev", linuxEnv, "edge-dev", browser{
			UserDirs: []string{lc + "microsoft-edge-dev" + nmh}, SystemDirs: []string{"/etc/opt/edge/native-messaging-hosts"},
			DataDir: lc + "microsoft-edge-dev", Executables: []string{"microsoft-edge-dev"}}},
		{"linux/brave", linuxEnv, "brave", browser{
			UserDirs: []string{lc + "BraveSoftware/Brave-Browser" + nmh}, SystemDirs: []string{"/etc/opt/chrome/native-messaging-hosts"},
			DataDir: lc + "BraveSoftware/Brave-Browser", Executables: []string{"brave-browser", "brave-browser-stable", "brave"}}},
		{"linux/vivaldi", linuxEnv, "vivaldi", browser{
			UserDirs: []string{lc + "vivaldi" + nmh}, SystemDirs: []string{"/etc/opt/vivaldi/native-messaging-hosts"},
			DataDir: lc + "vivaldi", Executables: []string{"vivaldi", "vivaldi-stable"}}},

		// macOS.
		{"darwin/chrome", darwinEnv, "chrome", browser{
			UserDirs: []string{mas + "Google/Chrome" + nmh}, SystemDirs: []string{"/Library/Google/Chrome/NativeMessagingHosts"},
			DataDir: mas + "Google/Chrome"}},
		{"darwin/chrome-beta", darwinEnv, "chrome-beta", browser{
			UserDirs: []string{mas + "Google/Chrome Beta" + nmh}, SystemDirs: []string{"/Library/Google/Chrome/NativeMessagingHosts"},
			DataDir: mas + "Google/Chrome Beta"}},
		{"darwin/chrome-dev", darwinEnv, "chrome-dev", browser{
			UserDirs: []string{mas + "Google/Chrome Dev" + nmh}, SystemDirs: []string{"/Library/Google/Chrome/NativeMessagingHosts"},
			DataDir: mas + "Google/Chrome Dev"}},
		{"darwin/chrome-canary", darwinEnv, "chrome-canary", browser{
			UserDirs: []string{mas + "Google/Chrome Canary" + nmh}, SystemDirs: []string{"/Library/Google/Chrome/NativeMessagingHosts"},
			DataDir: mas + "Google/Chrome Canary"}},
		{"darwin/chromium", darwinEnv, "chromium", browser{
			UserDirs: []string{mas + "Chromium" + nmh}, SystemDirs: []string{"/Library/Application Support/Chromium/NativeMessagingHosts"},
			DataDir: mas + "Chromium"}},
		{"darwin/edge", darwinEnv, "edge", browser{
			UserDirs: []string{mas + "Microsoft Edge" + nmh}, SystemDirs: []string{"/Library/Microsoft/Edge/NativeMessagingHosts"},
			DataDir: mas + "Microsoft Edge"}},
		{"darwin/edge-beta", darwinEnv, "edge-beta", browser{
			UserDirs: []string{mas + "Microsoft Edge Beta" + nmh}, SystemDirs: []string{"/Library/Microsoft/Edge/NativeMessagingHosts"},
			DataDir: mas + "Microsoft Edge Beta"}},
		{"darwin/edge-dev", darwinEnv, "edge-dev", browser{
			UserDirs: []string{mas + "Microsoft Edge Dev" + nmh}, SystemDirs: []string{"/Library/Microsoft/Edge/NativeMessagingHosts"},
			DataDir: mas + "Microsoft Edge Dev"}},
		{"darwin/brave", darwinEnv, "brave", browser{
			UserDirs:   []string{mas + "BraveSoftware/Brave-Browser" + nmh, mas + "Google/Chrome" + nmh},
			SystemDirs: []string{"/Library/Google/Chrome/NativeMessagingHosts"},
			DataDir:    mas + "BraveSoftware/Brave-Browser"}},
		{"darwin/vivaldi", darwinEnv, "vivaldi", browser{
			UserDirs: []string{mas + "Vivaldi" + nmh}, SystemDirs: []string{"/Library/Application Support/Vivaldi/NativeMessagingHosts"},
			DataDir: mas + "Vivaldi"}},

		// Windows.
		{"windows/chrome", windowsEnv, "chrome", browser{
			UserDirs: []string{winUser + "chrome"}, SystemDirs: []string{winSys + "chrome"},
			DataDir: lad + `Google\Chrome\User Data`, RegistryKeys: []string{`Software\Google\Chrome` + regHost}}},
		{"windows/chrome-beta", windowsEnv, "chrome-beta", browser{
			UserDirs: []string{winUser + "chrome-beta"}, SystemDirs: []string{winSys + "chrome-beta"},
			DataDir: lad + `Google\Chrome Beta\User Data`, RegistryKeys: []string{`Software\Google\Chrome` + regHost}}},
		{"windows/chrome-dev", windowsEnv, "chrome-dev", browser{
			UserDirs: []string{winUser + "chrome-dev"}, SystemDirs: []string{winSys + "chrome-dev"},
			DataDir: lad + `Google\Chrome Dev\User Data`, RegistryKeys: []string{`Software\Google\Chrome` + regHost}}},
		{"windows/chrome-canary", windowsEnv, "chrome-canary", browser{
			UserDirs: []string{winUser + "chrome-canary"}, SystemDirs: []string{winSys + "chrome-canary"},
			DataDir: lad + `Google\Chrome SxS\User Data`, RegistryKeys: []string{`Software\Google\Chrome` + regHost}}},
		{"windows/chromium", windowsEnv, "chromium", browser{
			UserDirs: []string{winUser + "chromium"}, SystemDirs: []string{winSys + "chromium"},
			DataDir: lad + `Chromium\User Data`, RegistryKeys: []string{`Software\Chromium` + regHost}}},
		{"windows/edge", windowsEnv, "edge", browser{
			UserDirs: []string{winUser + "edge"}, SystemDirs: []string{winSys + "edge"},
			DataDir: lad + `Microsoft\Edge\User Data`, RegistryKeys: []string{`Software\Microsoft\Edge` + regHost}}},
		{"windows/edge-beta", windowsEnv, "edge-beta", browser{
			UserDirs: []string{winUser + "edge-beta"}, SystemDirs: []string{winSys + "edge-beta"},
			DataDir: lad + `Microsoft\Edge Beta\User Data`, RegistryKeys: []string{`Software\Microsoft\Edge` + regHost}}},
		{"windows/edge-dev", windowsEnv, "edge-dev", browser{
			UserDirs: []string{winUser + "edge-dev"}, SystemDirs: []string{winSys + "edge-dev"},
			DataDir: lad + `Microsoft\Edge Dev\User Data`, RegistryKeys: []string{`Software\Microsoft\Edge` + regHost}}},
		{"windows/brave", windowsEnv, "brave", browser{
			UserDirs: []string{winUser + "brave"}, SystemDirs: []string{winSys + "brave"},
			DataDir:      lad + `BraveSoftware\Brave-Browser\User Data`,
			RegistryKeys: []string{`Software\BraveSoftware\Brave-Browser` + regHost, `Software\Google\Chrome` + regHost}}},
		{"windows/vivaldi", windowsEnv, "vivaldi", browser{
			UserDirs: []string{winUser + "vivaldi"}, SystemDirs: []string{winSys + "vivaldi"},
			DataDir:      lad + `Vivaldi\User Data`,
			RegistryKeys: []string{`Software\Vivaldi` + regHost, `Software\Google\Chrome` + regHost}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := findBrowser(browsersFor(tc.e), tc.key)
			if got == nil {
				t.Fatalf("no %s in the %s table", tc.key, tc.e.goos)
			}
			if got.Name == "" {
				t.Error("browser has no display name")
			}
			want := tc.want
			want.Key, want.Name = tc.key, got.Name
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("browser =\n%#v\nwant\n%#v", *got, want)
			}
		})
	}
}

func TestBrowserKeysPerOS(t *testing.T) {
	all := []string{"chrome", "chrome-beta", "chrome-dev", "chrome-canary", "chromium", "edge", "edge-beta", "edge-dev", "brave", "vivaldi"}
	noCanary := slices.DeleteFunc(slices.Clone(all), func(k string) bool { return k == "chrome-canary" })
	tests := []struct {
		name string
		e    env
		want []string
	}{
		{"linux", linuxEnv, noCanary},
		{"darwin", darwinEnv, all},
		{"windows", windowsEnv, all},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := keysOf(browsersFor(tc.e)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("keys = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSystemRootPrefix(t *testing.T) {
	tests := []struct {
		name string
		e    env
		key  string
		want string
	}{
		{"linux", env{goos: "linux", home: "/h", configHome: "/h/.config", sysRoot: "/tmp/root"}, "chromium", "/tmp/root/etc/chromium/native-messaging-hosts"},
		{"darwin", env{goos: "darwin", home: "/h", sysRoot: "/tmp/root"}, "edge", "/tmp/root/Library/Microsoft/Edge/NativeMessagingHosts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := findBrowser(browsersFor(tc.e), tc.key)
			if got := b.SystemDirs[0]; got != tc.want {
				t.Errorf("system dir = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPlanTargetsWindows(t *testing.T) {
	// Chrome and Brave share Chrome's registry key: it must point at
	// Chrome's manifest, and be written once.
	table := browsersFor(windowsEnv)
	targets, err := planTargets(windowsEnv, table, Options{Browsers: []string{"brave", "chrome"}})
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		dir     string
		root    string
		regKeys []string
	}
	var have []got
	for _, tg := range targets {
		have = append(have, got{tg.dir, tg.regRoot, tg.regKeys})
	}
	want := []got{
		{`C:\Users\u\AppData\Local\BrowserBridge\NativeMessagingHosts\chrome`, "HKCU",
			[]string{`Software\Google\Chrome\NativeMessagingHosts\com.browserbridge.host`}},
		{`C:\Users\u\AppData\Local\BrowserBridge\NativeMessagingHosts\brave`, "HKCU",
			[]string{`Software\BraveSoftware\Brave-Browser\NativeMessagingHosts\com.browserbridge.host`}},
	}
	if !reflect.DeepEqual(have, want) {
		t.Errorf("targets =\n%q\nwant\n%q", have, want)
	}

	targets, err = planTargets(windowsEnv, table, Options{Browsers: []string{"edge"}, System: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) != 1 || targets[0].regRoot != "HKLM" || targets[0].dir != `C:\ProgramData\BrowserBridge\NativeMessagingHosts\edge` {
		t.Errorf("system targets = %+v", targets)
	}

	if _, err := planTargets(windowsEnv, table, Options{Browsers: []string{"edge"}, UserDataDir: `C:\p`}); err == nil {
		t.Error("--user-data-dir accepted on Windows")
	}
}

func TestPlanTargetsSharedSystemDir(t *testing.T) {
	// Chrome and Brave read the same system directory on Linux: one file.
	table := browsersFor(linuxEnv)
	targets, err := planTargets(linuxEnv, table, Options{Browsers: []string{"chrome", "brave", "chromium"}, System: true})
	if err != nil {
		t.Fatal(err)
	}
	var dirs [][]string
	for _, tg := range targets {
		dirs = append(dirs, append([]string{tg.dir}, tg.browsers...))
	}
	want := [][]string{
		{"/etc/opt/chrome/native-messaging-hosts", "chrome", "brave"},
		{"/etc/chromium/native-messaging-hosts", "chromium"},
	}
	if !reflect.DeepEqual(dirs, want) {
		t.Errorf("targets = %q, want %q", dirs, want)
	}
}
