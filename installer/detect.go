package installer

import (
	"os"
	"os/exec"
)

// Detect returns the keys of the browsers set up for the current user, in
// table order: those whose user-data dir holds anything besides a
// NativeMessagingHosts directory (which Install itself may have created), and
// on Linux also those whose executable is on PATH.
func Detect() []string {
	e, err := currentEnv()
	if err != nil {
		return nil
	}
	return detect(e, browsersFor(e))
}

func detect(e env, table []browser) []string {
	var keys []string
	for _, b := range table {
		if dataDirInUse(b.DataDir) || onPath(b.Executables) {
			keys = append(keys, b.Key)
		}
	}
	return keys
}

// dataDirInUse reports whether dir exists and holds something the browser
// made, i.e. anything other than NativeMessagingHosts.
func dataDirInUse(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, ent := range entries {
		if ent.Name() != hostsDirName {
			return true
		}
	}
	return false
}

// onPath reports whether any of names is an executable on PATH. Only Linux
// browsers list executables; macOS apps and Windows programs are not on PATH.
func onPath(names []string) bool {
	for _, n := range names {
		if _, err := exec.LookPath(n); err == nil {
			return true
		}
	}
	return false
}
