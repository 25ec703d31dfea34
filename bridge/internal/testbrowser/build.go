package testbrowser

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Binaries are the two programs built from this checkout.
type Binaries struct {
	Host   string // browserbridge-host
	Bridge string // browserbridge
}

// Build compiles the host and the bridge into dir, so tests run the same
// programs Chrome and the service manager would.
func Build(dir string) (Binaries, error) {
	exe := ""
	if runtime.GOOS == "windows" {
		exe = ".exe"
	}
	b := Binaries{Host: filepath.Join(dir, "browserbridge-host"+exe), Bridge: filepath.Join(dir, "browserbridge"+exe)}
	for out, pkg := range map[string]string{
		b.Host:   "github.com/browserbridge/browserbridge/host",
		b.Bridge: "github.com/browserbridge/browserbridge/bridge/cmd/browserbridge",
	} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		if msg, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("go build %s: %v\n%s", pkg, err, strings.TrimSpace(string(msg)))
		}
	}
	return b, nil
}
