package installer

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/browserbridge/browserbridge/manifests"
)

// browserSpec is one row of the browser table: where a Chromium browser
// looks for native-messaging host manifests on each OS. Paths are relative to
// the per-OS base directories; an empty linuxConfig or macSupport means the
// browser does not exist on that OS.
type browserSpec struct {
	key  string
	name string

	// Linux: the user-data dir is <config home>/<linuxConfig> and the
	// user-level hosts live in its NativeMessagingHosts.
	linuxConfig string
	linuxSystem string   // system-wide hosts directory
	linuxExes   []string // executables whose presence on PATH means "installed"

	// macOS: the user-data dir is ~/Library/Application Support/<macSupport>.
	macSupport string
	macSystem  string
	// macAlsoUser lists other user-data dirs, relative to Application
	// Support, whose NativeMessagingHosts the browser also reads. Brave on
	// macOS is known to look in Chrome's directory.
	macAlsoUser []string

	// Windows: the user-data dir is %LOCALAPPDATA%\<winData>; hosts are
	// found through the default value of <key>\com.browserbridge.host under
	// HKCU or HKLM for each key in winKeys, first one first.
	winData string
	winKeys []string
}

// The browser table. Chrome's channels share Chrome's system directory and
// registry key (they are compiled in by branding, not channel); the same holds
// for Edge. Brave and Vivaldi have been seen to read Chrome's registry key on
// Windows, so they are registered under both their own key and Chrome's.
var browserSpecs = []browserSpec{
	{
		key: "chrome", name: "Google Chrome",
		linuxConfig: "google-chrome", linuxSystem: "/etc/opt/chrome/native-messaging-hosts",
		linuxExes:  []string{"google-chrome", "google-chrome-stable"},
		macSupport: "Google/Chrome", macSystem: "/Library/Google/Chrome/NativeMessagingHosts",
		winData: `Google\Chrome\User Data`, winKeys: []string{keyChrome},
	},
	{
		key: "chrome-beta", name: "Google Chrome Beta",
		linuxConfig: "google-chrome-beta", linuxSystem: "/etc/opt/chrome/native-messaging-hosts",
		linuxExes:  []string{"google-chrome-beta"},
		macSupport: "Google/Chrome Beta", macSystem: "/Library/Google/Chrome/NativeMessagingHosts",
		winData: `Google\Chrome Beta\User Data`, winKeys: []string{keyChrome},
	},
	{
		key: "chrome-dev", name: "Google Chrome Dev",
		linuxConfig: "google-chrome-unstable", linuxSystem: "/etc/opt/chrome/native-messaging-hosts",
		linuxExes:  []string{"google-chrome-unstable"},
		macSupport: "Google/Chrome Dev", macSystem: "/Library/Google/Chrome/NativeMessagingHosts",
		winData: `Google\Chrome Dev\User Data`, winKeys: []string{keyChrome},
	},
	{
		key: "chrome-canary", name: "Google Chrome Canary",
		macSupport: "Google/Chrome Canary", macSystem: "/Library/Google/Chrome/NativeMessagingHosts",
		winData: `Google\Chrome SxS\User Data`, winKeys: []string{keyChrome},
	},
	{
		key: "chromium", name: "Chromium",
		linuxConfig: "chromium", linuxSystem: "/etc/chromium/native-messaging-hosts",
		linuxExes:  []string{"chromium", "chromium-browser"},
		macSupport: "Chromium", macSystem: "/Library/Application Support/Chromium/NativeMessagingHosts",
		winData: `Chromium\User Data`, winKeys: []string{`Software\Chromium\NativeMessagingHosts`},
	},
	{
		key: "edge", name: "Microsoft Edge",
		linuxConfig: "microsoft-edge", linuxSystem: "/etc/opt/edge/native-messaging-hosts",
		linuxExes:  []string{"microsoft-edge", "microsoft-edge-stable"},
		macSupport: "Microsoft Edge", macSystem: "/Library/Microsoft/Edge/NativeMessagingHosts",
		winData: `Microsoft\Edge\User Data`, winKeys: []string{keyEdge},
	},
	{
		key: "edge-beta", name: "Microsoft Edge Beta",
		linuxConfig: "microsoft-edge-beta", linuxSystem: "/etc/opt/edge/native-messaging-hosts",
		linuxExes:  []string{"microsoft-edge-beta"},
		macSupport: "Microsoft Edge Beta", macSystem: "/Library/Microsoft/Edge/NativeMessagingHosts",
		winData: `Microsoft\Edge Beta\User Data`, winKeys: []string{keyEdge},
	},
	{
		key: "edge-dev", name: "Microsoft Edge Dev",
		linuxConfig: "microsoft-edge-dev", linuxSystem: "/etc/opt/edge/native-messaging-hosts",
		linuxExes:  []string{"microsoft-edge-dev"},
		macSupport: "Microsoft Edge Dev", macSystem: "/Library/Microsoft/Edge/NativeMessagingHosts",
		winData: `Microsoft\Edge Dev\User Data`, winKeys: []string{keyEdge},
	},
	{
		key: "brave", name: "Brave",
		linuxConfig: "BraveSoftware/Brave-Browser", linuxSystem: "/etc/opt/chrome/native-messaging-hosts",
		linuxExes:  []string{"brave-browser", "brave-browser-stable", "brave"},
		macSupport: "BraveSoftware/Brave-Browser", macSystem: "/Library/Google/Chrome/NativeMessagingHosts",
		macAlsoUser: []string{"Google/Chrome"},
		winData:     `BraveSoftware\Brave-Browser\User Data`,
		winKeys:     []string{`Software\BraveSoftware\Brave-Browser\NativeMessagingHosts`, keyChrome},
	},
	{
		key: "vivaldi", name: "Vivaldi",
		linuxConfig: "vivaldi", linuxSystem: "/etc/opt/vivaldi/native-messaging-hosts",
		linuxExes:  []string{"vivaldi", "vivaldi-stable"},
		macSupport: "Vivaldi", macSystem: "/Library/Application Support/Vivaldi/NativeMessagingHosts",
		winData: `Vivaldi\User Data`,
		winKeys: []string{`Software\Vivaldi\NativeMessagingHosts`, keyChrome},
	},
}

const (
	keyChrome = `Software\Google\Chrome\NativeMessagingHosts`
	keyEdge   = `Software\Microsoft\Edge\NativeMessagingHosts`
)

// hostsDirName is the directory inside a user-data dir that holds user-level
// host manifests on Linux and macOS.
const hostsDirName = "NativeMessagingHosts"

// browser is a browserSpec resolved for one OS and one user.
type browser struct {
	Key  string
	Name string
	// UserDirs are the user-level directories that get the manifest, the
	// browser's own first. On Windows it is the one directory under
	// %LOCALAPPDATA%\BrowserBridge that the registry keys point into.
	UserDirs []string
	// SystemDirs are the system-wide directories (on Windows, under
	// %ProgramData%\BrowserBridge, pointed to from HKLM).
	SystemDirs []string
	// DataDir is the browser's default user-data dir, used for detection.
	DataDir string
	// RegistryKeys are the full key paths, below HKCU or HKLM, whose default
	// value names the manifest (Windows only).
	RegistryKeys []string
	// Executables are looked up on PATH for detection (Linux only).
	Executables []string
}

// env holds everything the browser table depends on, so that the tables for
// every OS can be built and tested anywhere.
type env struct {
	goos string
	// home is the user's home directory (Linux, macOS).
	home string
	// configHome is where Linux browsers keep their user-data dirs:
	// $CHROME_CONFIG_HOME, else $XDG_CONFIG_HOME, else ~/.config.
	configHome string
	// localAppData and programData are %LOCALAPPDATA% and %ProgramData%.
	localAppData string
	programData  string
	// sysRoot, if set, is prefixed to Linux and macOS system-wide paths.
	// Only tests set it.
	sysRoot string
}

// sysRootOverride is copied into env.sysRoot by currentEnv; tests point it
// at a temporary directory so that system installs stay inside it.
var sysRootOverride string

// currentEnv reads the environment of the running process.
func currentEnv() (env, error) {
	e := env{goos: runtime.GOOS, sysRoot: sysRootOverride}
	if e.goos == "windows" {
		e.localAppData = os.Getenv("LOCALAPPDATA")
		if e.localAppData == "" {
			return e, errors.New("finding browser directories: LOCALAPPDATA is not set")
		}
		e.programData = os.Getenv("ProgramData")
		if e.programData == "" {
			e.programData = os.Getenv("ALLUSERSPROFILE")
		}
		if e.programData == "" {
			e.programData = `C:\ProgramData`
		}
		return e, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return e, fmt.Errorf("finding browser directories: %w", err)
	}
	e.home = home
	e.configHome = filepath.Join(home, ".config")
	// Chromium on Linux prefers CHROME_CONFIG_HOME, then XDG_CONFIG_HOME;
	// relative values are ignored, as the XDG spec says.
	for _, v := range []string{"CHROME_CONFIG_HOME", "XDG_CONFIG_HOME"} {
		if d := os.Getenv(v); d != "" && filepath.IsAbs(d) {
			e.configHome = d
			break
		}
	}
	return e, nil
}

// join joins path elements with the separator of e.goos, which need not be
// the OS running this code.
func (e env) join(elem ...string) string {
	if e.goos == runtime.GOOS {
		return filepath.Join(elem...)
	}
	if e.goos != "windows" {
		return path.Join(elem...)
	}
	// Windows paths built elsewhere: join with backslashes but leave each
	// element alone, so that a temporary base directory from a Unix test
	// stays absolute there.
	var parts []string
	for _, p := range elem {
		if p = strings.TrimRight(p, `\`); p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, `\`)
}

// system returns a system-wide path, under e.sysRoot when tests set one.
func (e env) system(p string) string {
	if e.sysRoot == "" {
		return p
	}
	return e.join(e.sysRoot, p)
}

// browsersFor resolves the browser table for e.goos, in table order. Browsers
// that do not exist on that OS are left out.
func browsersFor(e env) []browser {
	var out []browser
	for _, s := range browserSpecs {
		b := browser{Key: s.key, Name: s.name}
		switch e.goos {
		case "windows":
			b.DataDir = e.join(e.localAppData, s.winData)
			b.UserDirs = []string{e.join(e.localAppData, "BrowserBridge", hostsDirName, s.key)}
			b.SystemDirs = []string{e.join(e.programData, "BrowserBridge", hostsDirName, s.key)}
			for _, k := range s.winKeys {
				b.RegistryKeys = append(b.RegistryKeys, k+`\`+manifests.HostName)
			}
		case "darwin":
			if s.macSupport == "" {
				continue
			}
			support := e.join(e.home, "Library", "Application Support")
			b.DataDir = e.join(support, s.macSupport)
			b.UserDirs = []string{e.join(b.DataDir, hostsDirName)}
			for _, d := range s.macAlsoUser {
				b.UserDirs = append(b.UserDirs, e.join(support, d, hostsDirName))
			}
			b.SystemDirs = []string{e.system(s.macSystem)}
		default: // Linux and the other Unixes Chromium builds for.
			if s.linuxConfig == "" {
				continue
			}
			b.DataDir = e.join(e.configHome, s.linuxConfig)
			b.UserDirs = []string{e.join(b.DataDir, hostsDirName)}
			b.SystemDirs = []string{e.system(s.linuxSystem)}
			b.Executables = s.linuxExes
		}
		out = append(out, b)
	}
	return out
}

// Browsers returns the keys of every browser the installer supports on this
// OS, in a stable order.
func Browsers() []string { return keysOf(browsersFor(env{goos: runtime.GOOS})) }

func keysOf(bs []browser) []string {
	keys := make([]string, len(bs))
	for i, b := range bs {
		keys[i] = b.Key
	}
	return keys
}

// findBrowser returns the browser with key, or nil.
func findBrowser(bs []browser, key string) *browser {
	for i := range bs {
		if bs[i].Key == key {
			return &bs[i]
		}
	}
	return nil
}
