//go:build linux

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
)

// chromiumBin is Debian's unbranded Chromium, which still honours
// --load-extension (branded Chrome 137+ ignores it).
const chromiumBin = "/usr/bin/chromium"

var (
	bins    testbrowser.Binaries
	echoBin string // testdata/echohost, a raw native-messaging echo
	binDir  string // where the binaries live; unique to this run, so pgrep can find exactly ours
	extDir  string // the unpacked extension: the tests' build (testbrowser.BuildExtension)
	// installedExtDir is the extension as installed, without the tests'
	// overlay (worldOptions.installedExtension); "" with
	// BROWSERBRIDGE_E2E_EXTENSION, when extDir is used instead.
	installedExtDir string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if _, err := os.Stat(chromiumBin); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %s is missing (%v): the end-to-end suite needs Debian's chromium: apt-get install chromium\n", chromiumBin, err)
		return 1
	}
	var err error
	if binDir, err = os.MkdirTemp("", "bbe2e-bin"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(binDir)
	extDir = os.Getenv("BROWSERBRIDGE_E2E_EXTENSION") // another unpacked extension with the same key, to debug the harness
	if extDir == "" {
		// The extension as installed, plus the tests' own files
		// (extension/test/overlay: native_echo_benchmark, which the
		// installed extension does not ship).
		extDir = filepath.Join(binDir, "extension")
		if err := testbrowser.BuildExtension(filepath.Join("..", "..", "..", "extension"), extDir); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		installedExtDir = filepath.Join(binDir, "extension-installed")
		if err := testbrowser.BuildInstalledExtension(filepath.Join("..", "..", "..", "extension"), installedExtDir); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
	}
	if extDir, err = filepath.Abs(extDir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if bins, err = testbrowser.Build(binDir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	echoBin = filepath.Join(binDir, "echohost")
	cmd := exec.Command("go", "build", "-o", echoBin, "./testdata/echohost")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build ./testdata/echohost: %v\n%s\n", err, strings.TrimSpace(string(out)))
		return 1
	}
	return m.Run()
}
